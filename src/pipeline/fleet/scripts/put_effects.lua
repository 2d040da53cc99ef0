-- put effects: record effects in a shared idempotent set, counting the repeats.
--
-- KEYS[1] {NS}:effects:<set> (set of ids), KEYS[2] {NS}:effects-dups (hash set -> duplicates)
-- ARGV[1] the set's name, ARGV[2..] the ids
--
-- Each id is added; one already there is a duplicate (a redelivery the sink absorbed) and
-- counted. Answers 1 (first time) or 0 (duplicate) per id. Nothing to check first: SADD is
-- its own check. Running it twice after a lost reply counts the second run's ids as
-- duplicates: the count is an upper bound on the redeliveries absorbed.
local out, dups = {}, 0
for i = 2, #ARGV do
  local added = redis.call('SADD', KEYS[1], ARGV[i])
  out[#out + 1] = added
  if added == 0 then dups = dups + 1 end
end
if dups > 0 then
  redis.call('HINCRBY', KEYS[2], ARGV[1], dups)
end
return out
