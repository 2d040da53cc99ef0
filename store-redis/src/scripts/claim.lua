-- claim.lua: take up to `limit` retries due now and lease them to `node`, in one step.
--
-- KEYS[1] is the namespace's prefix `{NS}:` (every key is built from it: one hash tag, one
-- Cluster slot). ARGV: node, limit, lease_ms.
--
-- Reads: the server's clock (TIME: a node's clock never decides a lease), the head of the due
-- set up to now, each row's `reaps` and `claims`.
-- Checks: a due entry whose row is gone is only dropped from the set (nothing to fire).
-- Writes, per entry taken: ZREM due, and the row in flight (`state` inflight, `owner` node, a
-- fresh fencing `token` = INCR seq, `lease_ms` = now + lease, `claims` + 1), ZADD inflight by
-- the lease deadline. A claimed retry is never in neither set.
-- Answers: { now_ms, the next due time (or nil), how many were reclaims (rows reaped since they
-- were last scheduled), then per claim { token, the row's fields } }.
--
-- Running it twice claims other entries (or none): what the first run claimed is in flight,
-- not due. A first run whose reply was lost leaves its claims in flight under tokens nobody
-- holds; their leases run out and reap.lua returns them, so nothing is lost, only delayed.

local P = KEYS[1]
local DUE, INFLIGHT = P .. 'due', P .. 'inflight'
local node, limit, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_ms = string.format('%d', now)
local deadline = string.format('%d', now + lease)

local ids = redis.call('ZRANGE', DUE, '-inf', now_ms, 'BYSCORE', 'LIMIT', 0, limit)
-- They are the head of the set: remove them by rank, in one command.
if #ids > 0 then redis.call('ZREMRANGEBYRANK', DUE, 0, #ids - 1) end

local out, reclaims = { now_ms, false, 0 }, 0
for _, id in ipairs(ids) do
  local row = P .. 'r:' .. id
  -- Every row has both (apply.lua writes them); a row with neither is gone.
  local st = redis.call('HMGET', row, 'reaps', 'claims')
  if st[1] or st[2] then
    if tonumber(st[1] or '0') > 0 then reclaims = reclaims + 1 end
    local token = redis.call('INCR', P .. 'seq')
    redis.call('HSET', row, 'state', 'inflight', 'owner', node, 'token', token,
      'lease_ms', deadline, 'claims', (tonumber(st[2]) or 0) + 1)
    redis.call('ZADD', INFLIGHT, deadline, id)
    out[#out + 1] = { token, redis.call('HGETALL', row) }
  end
end

local head = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
out[2] = head[2] or false
out[3] = reclaims
return out
