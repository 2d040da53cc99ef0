-- reap.lua: return claims whose lease ran out to the due set.
--
-- KEYS[1] is the namespace's prefix `{NS}:` (one hash tag, one Cluster slot). ARGV: node,
-- limit, max_reaps, lease_ms.
--
-- Reads: the server's clock (TIME), up to `limit` in-flight entries whose deadline is past,
-- each one's fate and row.
-- Checks and writes, per entry:
--   - the message has a fate, or its row is gone (or not in flight): only the set entry is
--     cleaned up (and a row beside a fate dropped);
--   - else `reaps` + 1. Above `max_reaps` the row is a crash loop: leased to the reaping node
--     (owner, a fresh token, deadline now + lease, `claims` + 1), which dead-letters it;
--   - else the row is due again (`state` due, no owner, token or lease) at its own due time,
--     which is past, so it is first in line: ZADD due, ZREM inflight. Its attempt is
--     unchanged: no decision was made.
-- Answers: { the ids returned to the due set, per crash loop { token, the row's fields } }.
--
-- Running it twice finds nothing more to reap: what the first run returned is due, and a crash
-- loop it leased has a fresh deadline. A crash loop whose reply was lost is reaped again
-- after its lease, and comes back as a crash loop again.

local P = KEYS[1]
local DUE, INFLIGHT = P .. 'due', P .. 'inflight'
local node, limit, max_reaps, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_ms = string.format('%d', now)
local deadline = string.format('%d', now + lease)

local ids = redis.call('ZRANGE', INFLIGHT, '-inf', now_ms, 'BYSCORE', 'LIMIT', 0, limit)
local returned, loops = {}, {}
for _, id in ipairs(ids) do
  local row = P .. 'r:' .. id
  local fate = redis.call('EXISTS', P .. 'f:' .. id) == 1
  local st = redis.call('HMGET', row, 'state', 'due_ms')
  if fate or st[1] ~= 'inflight' or not st[2] then
    redis.call('ZREM', INFLIGHT, id)
    if fate then
      redis.call('DEL', row)
      redis.call('ZREM', DUE, id)
    end
  elseif redis.call('HINCRBY', row, 'reaps', 1) > max_reaps then
    local token = redis.call('INCR', P .. 'seq')
    redis.call('HSET', row, 'owner', node, 'token', token, 'lease_ms', deadline)
    redis.call('HINCRBY', row, 'claims', 1)
    redis.call('ZADD', INFLIGHT, deadline, id)
    loops[#loops + 1] = { token, redis.call('HGETALL', row) }
  else
    redis.call('HSET', row, 'state', 'due')
    redis.call('HDEL', row, 'owner', 'token', 'lease_ms')
    redis.call('ZADD', DUE, st[2], id)
    redis.call('ZREM', INFLIGHT, id)
    returned[#returned + 1] = id
  end
end
return { returned, loops }
