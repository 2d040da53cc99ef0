-- partitions (read only): every partition's epoch and live owner.
--
-- ARGV[1] the prefix {NS}:, ARGV[2] source, ARGV[3] partitions P
-- KEYS[1] {NS}:src-members:<source> (unused; names the slot)
--
-- Answers {p, epoch, owner or '', instance or '', lease_until_ms} for each p; a lease that
-- ended by the server's clock answers no owner. Writes nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, source, P = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for p = 0, P - 1 do
  local f = redis.call('HMGET', prefix .. 'src:' .. source .. '/' .. p, 'owner', 'instance', 'epoch', 'lease_ms')
  local until_ms = tonumber(f[4] or 0)
  if f[1] and until_ms > now then
    out[#out + 1] = {p, tonumber(f[3] or 0), f[1], f[2] or '', until_ms}
  else
    out[#out + 1] = {p, tonumber(f[3] or 0), '', '', 0}
  end
end
return out
