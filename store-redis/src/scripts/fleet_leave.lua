-- leave: a node gives its name back.
--
-- KEYS[1] {NS}:nodes
-- ARGV[1] the prefix {NS}:, ARGV[2] node, ARGV[3] instance
--
-- Only the instance that holds the name can give it back (1), so a late leave from a process
-- that was taken over does not remove its successor (0). Drops the report and what the node
-- said it runs. Running it twice: the second finds nothing and answers 0.
local prefix, node, instance = ARGV[1], ARGV[2], ARGV[3]
local nodekey = prefix .. 'node:' .. node
if redis.call('HGET', nodekey, 'instance') ~= instance then
  return 0
end
redis.call('ZREM', KEYS[1], node)
redis.call('DEL', nodekey)
redis.call('HDEL', prefix .. 'rules:applied', node)
redis.call('HDEL', prefix .. 'rules:errors', node)
return 1
