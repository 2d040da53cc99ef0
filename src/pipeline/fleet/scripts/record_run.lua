-- record run: the first node records the bundled run's parameters; the others read them.
--
-- KEYS[1] {NS}:run (hash name -> value)
-- ARGV: name, value, name, value, ...
--
-- If a run is recorded, answers {0, its parameters} and writes nothing; otherwise records
-- these and answers {1, them}. Running it twice: the second run finds the first's record.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGETALL', KEYS[1])}
end
if #ARGV > 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
end
return {1, redis.call('HGETALL', KEYS[1])}
