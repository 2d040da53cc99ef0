-- extend.lua: renew the leases of a node's claims.
--
-- KEYS[1] is the namespace's prefix `{NS}:` (one hash tag, one Cluster slot). ARGV: node,
-- lease_ms, then id, token for each claim.
--
-- Reads: the server's clock (TIME), each row's `state`, `token` and `owner`.
-- Checks: the row is still in flight under that token, owned by that node (its fate was not
-- written, it was not scheduled again, it was not reaped and perhaps claimed by another).
-- Writes, where the check holds: the deadline now + lease, as the row's `lease_ms` and as its
-- score in the in-flight set (ZADD XX: only an entry that is there).
-- Answers: per claim, 1 if it is still this node's, else 0.
--
-- Running it twice renews the same leases again, to a deadline as late or later.

local P = KEYS[1]
local INFLIGHT = P .. 'inflight'
local node, lease = ARGV[1], tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = string.format('%d', now + lease)

local out = {}
for k = 3, #ARGV - 1, 2 do
  local id, token = ARGV[k], ARGV[k + 1]
  local row = P .. 'r:' .. id
  local st = redis.call('HMGET', row, 'state', 'token', 'owner')
  if st[1] == 'inflight' and st[2] == token and st[3] == node then
    redis.call('HSET', row, 'lease_ms', deadline)
    redis.call('ZADD', INFLIGHT, 'XX', deadline, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
