-- finish run: the first node to see every message settled records when; first wins.
--
-- KEYS[1] {NS}:run:finished (string: ms)
-- ARGV[1] the time, ms
--
-- Writes the time only if none is recorded, and answers the recorded one. Running it twice
-- answers the same.
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
