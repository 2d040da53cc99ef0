-- heartbeat: a node says it is alive and what it does (`/v1/nodes`).
--
-- KEYS[1] {NS}:nodes (zset node -> last seen ms)
-- ARGV[1] the prefix {NS}:, ARGV[2] node, ARGV[3] instance, ARGV[4] how many fields follow
-- to clear, then those field names, then field/value pairs to set.
--
-- Checks that this instance still holds the name (0 if not: another process took it over
-- after this one was silent past its lease, or the node left; the caller must stop). Then
-- sets last seen to the server's now, clears the fields the node no longer reports and sets
-- the others. Running it twice writes the same report with a later last seen.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, node, instance = ARGV[1], ARGV[2], ARGV[3]
local nodekey = prefix .. 'node:' .. node
if redis.call('HGET', nodekey, 'instance') ~= instance then
  return 0
end
local clear = tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], now, node)
for i = 5, 4 + clear do
  redis.call('HDEL', nodekey, ARGV[i])
end
if #ARGV > 4 + clear then
  redis.call('HSET', nodekey, unpack(ARGV, 5 + clear))
end
return 1
