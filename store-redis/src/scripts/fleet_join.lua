-- join: a node takes its name in the fleet.
--
-- KEYS[1] {NS}:nodes (zset node -> last seen ms)
-- ARGV[1] the prefix {NS}:, ARGV[2] node, ARGV[3] instance (this process), ARGV[4] lease ms,
-- ARGV[5] (may be empty) an instance the caller found dead (its own dead predecessor: a
-- process of this host that no longer runs)
--
-- Reads the name's registered instance and when it was last seen (server time). Refuses
-- ({0, started_ms, last_seen_ms, instance}) if another instance holds the name and was seen
-- within the lease, unless it is ARGV[5]: a second live process with the same name. (The
-- caller checks whether that instance still runs, and calls again naming it if not; the
-- name is taken only if it is still that instance's, so a third process is never overrun.) Otherwise writes the name for this
-- instance ({1, started_ms, took_over, ''}): a fresh report if the name was free or its holder
-- dead (the dead one's report is dropped), or just a new last-seen if this instance already
-- holds it. Running it twice is safe: the second run finds this instance and keeps its start.
-- It also forgets nodes not seen for 60 leases (default names are HOSTNAME-PID: without this
-- every restart would leave a name behind for good).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, node, instance = ARGV[1], ARGV[2], ARGV[3]
local lease = tonumber(ARGV[4])
local nodekey = prefix .. 'node:' .. node

local held = redis.call('HMGET', nodekey, 'instance', 'started_ms')
local seen = tonumber(redis.call('ZSCORE', KEYS[1], node) or false)
local dead = ARGV[5] or ''
if held[1] and held[1] ~= instance and held[1] ~= dead and seen and seen >= now - lease then
  return {0, tonumber(held[2] or 0), seen, held[1]}
end

local gone = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. (now - 60 * lease), 'BYSCORE', 'LIMIT', 0, 100)
for _, old in ipairs(gone) do
  if old ~= node then
    redis.call('ZREM', KEYS[1], old)
    redis.call('DEL', prefix .. 'node:' .. old)
    redis.call('HDEL', prefix .. 'rules:applied', old)
    redis.call('HDEL', prefix .. 'rules:errors', old)
  end
end

redis.call('ZADD', KEYS[1], now, node)
if held[1] == instance then
  return {1, tonumber(held[2] or now), 0, ''}
end
redis.call('DEL', nodekey)
redis.call('HSET', nodekey, 'instance', instance, 'started_ms', now)
local took_over = 0
if held[1] then took_over = 1 end
return {1, now, took_over, ''}
