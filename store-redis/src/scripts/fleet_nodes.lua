-- nodes (read only): the live nodes and their reports.
--
-- KEYS[1] {NS}:nodes
-- ARGV[1] the prefix {NS}:, ARGV[2] lease ms
--
-- A node is live if it was seen within the lease, by the server's clock. Answers
-- {node, last_seen_ms, {field, value, ...}} for each. Writes nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix = ARGV[1]
local live = redis.call('ZRANGE', KEYS[1], now - tonumber(ARGV[2]), '+inf', 'BYSCORE', 'WITHSCORES')
local out = {}
for i = 1, #live, 2 do
  local node = live[i]
  out[#out + 1] = {node, tonumber(live[i + 1]), redis.call('HGETALL', prefix .. 'node:' .. node)}
end
return out
