-- rules applied: a node says which rule set it runs, and why it could not run the store's.
--
-- KEYS[1] {NS}:rules:applied (hash node -> version), KEYS[2] {NS}:rules:errors (hash node ->
-- JSON list of errors)
-- ARGV[1] node, ARGV[2] version, ARGV[3] errors JSON, or '' for none
--
-- Nothing to check: each node writes only its own fields. Running it twice writes the same.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
return 1
