-- Adds one node's counts to the running canary's and answers the fleet's sums.
-- KEYS[1] {NS}:canary:arms
-- ARGV[1] epoch, then pairs: field, increment
-- Answers the hash as a flat list, or false when the counters are another epoch's.
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then
  return false
end
for i = 2, #ARGV, 2 do
  local n = tonumber(ARGV[i + 1])
  if n ~= 0 then
    redis.call('HINCRBY', KEYS[1], ARGV[i], n)
  end
end
return redis.call('HGETALL', KEYS[1])
