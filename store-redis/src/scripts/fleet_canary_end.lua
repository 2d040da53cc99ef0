-- Ends the running (or held) canary of an epoch: the first node to end it wins.
-- KEYS[1] {NS}:canary
-- ARGV[1] epoch  ARGV[2] state (promoted, rolled_back or held/running for a change of state)
-- ARGV[3] reason  ARGV[4] arms (the product's JSON of the figures that decided)
-- Answers 1 when this call changed it, 0 when it is another epoch's or already ended.
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then
  return 0
end
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'running' and state ~= 'held' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'reason', ARGV[3], 'arms', ARGV[4])
return 1
