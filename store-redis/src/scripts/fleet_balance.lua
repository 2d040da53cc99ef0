-- balance: a node renews its source partitions, and takes its fair share of the free ones.
--
-- KEYS[1] {NS}:nodes (zset node -> last seen ms), KEYS[2] {NS}:src-members:<source> (zset
-- node -> last balance ms: the nodes that run this source)
-- ARGV[1] the prefix {NS}:, ARGV[2] source, ARGV[3] partitions P, ARGV[4] node,
-- ARGV[5] instance, ARGV[6] lease ms
-- Partition p's lease is the hash {NS}:src:<source>/<p>: owner, instance, epoch, lease_ms.
--
-- Reads, by the server's clock:
-- - whether the caller is the live, registered instance of its node; if not it holds
--   nothing and writes nothing ({0, 0, 0, {}, {}}): a process taken over must stop;
-- - the live members: nodes that balanced this source and heartbeat within the lease (a
--   node that does not run the source, `serve`, is not given a share);
-- - every partition: the caller's own (same owner and instance, expired or not: nobody held
--   it meanwhile, or its owner would differ), the free ones (never owned, released, or lease
--   ended), and how many each live member holds.
-- Decides: fair = ceil(P / live), floor = floor(P / live). The caller's target is fair, or
-- floor while another live member holds fewer than floor (so those below their share get the
-- free partitions first, and a holder at ceil gives one up for them). Surplus is what the
-- caller holds beyond its target, highest partitions first.
-- Writes: its membership, a renewed lease on every partition it holds (surplus included:
-- it still runs them until it stops them and releases them, see release), and takes free
-- partitions, lowest first, up to its target: each taking INCRs the partition's epoch (the
-- fence of its position writes). Never takes a live partition from another node.
-- Answers {1, live, fair, {p, epoch, lease_until_ms, ...}, {surplus p, ...}}.
-- Running it twice is safe: the second run renews what the first took (epoch kept).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, source = ARGV[1], ARGV[2]
local P, node, instance = tonumber(ARGV[3]), ARGV[4], ARGV[5]
local lease = tonumber(ARGV[6])
local cutoff = now - lease

if redis.call('HGET', prefix .. 'node:' .. node, 'instance') ~= instance then
  return {0, 0, 0, {}, {}}
end
local seen = tonumber(redis.call('ZSCORE', KEYS[1], node) or false)
if not seen or seen < cutoff then
  return {0, 0, 0, {}, {}}
end

local holds = {[node] = 0}
local live = 1
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], cutoff, '+inf', 'BYSCORE')) do
  if m ~= node then
    local s = tonumber(redis.call('ZSCORE', KEYS[1], m) or false)
    if s and s >= cutoff then
      holds[m] = 0
      live = live + 1
    end
  end
end

local mine, epochs, free = {}, {}, {}
for p = 0, P - 1 do
  local f = redis.call('HMGET', prefix .. 'src:' .. source .. '/' .. p, 'owner', 'instance', 'epoch', 'lease_ms')
  if f[1] == node and f[2] == instance then
    mine[#mine + 1] = p
    epochs[p] = tonumber(f[3] or 0)
  elseif not f[1] or tonumber(f[4] or 0) <= now then
    free[#free + 1] = p
  elseif f[1] ~= node and holds[f[1]] then
    holds[f[1]] = holds[f[1]] + 1
  end
end

local fair = math.ceil(P / live)
local floor = math.floor(P / live)
local target = fair
for m, n in pairs(holds) do
  if m ~= node and n < floor then
    target = floor
  end
end

local surplus = {}
for i = #mine, target + 1, -1 do
  surplus[#surplus + 1] = mine[i]
end

-- Writes from here on.
redis.call('ZADD', KEYS[2], now, node)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - 60 * lease))
local until_ms = now + lease
for _, p in ipairs(mine) do
  redis.call('HSET', prefix .. 'src:' .. source .. '/' .. p, 'lease_ms', until_ms)
end
local i = 1
while #mine < target and i <= #free do
  local p = free[i]
  local key = prefix .. 'src:' .. source .. '/' .. p
  epochs[p] = redis.call('HINCRBY', key, 'epoch', 1)
  redis.call('HSET', key, 'owner', node, 'instance', instance, 'lease_ms', until_ms)
  mine[#mine + 1] = p
  i = i + 1
end

table.sort(mine)
local held = {}
for _, p in ipairs(mine) do
  held[#held + 1] = p
  held[#held + 1] = epochs[p]
  held[#held + 1] = until_ms
end
return {1, live, fair, held, surplus}
