-- adaptive: one node's sync of the fleet's adaptive state (budgets, breakers, the fuse, heat):
-- add its counts, open the breakers it opened, store its heat, read the fleet's totals.
--
-- KEYS[1] {NS}:adaptive:members (zset process -> last sync ms, the server's clock)
-- KEYS[2] {NS}:adaptive:breakers (hash BREAKER\x1fKEY -> "EPOCH OPENED_AT_MS")
-- KEYS[3] {NS}:adaptive:seq (hash process -> the last push seq counted)
-- ARGV[1] the prefix {NS}:, ARGV[2] this process, ARGV[3] the push's seq, ARGV[4] live window
-- ms, then four lists, each its length first:
--   adds     (name, bucket width ms, count)  into {NS}:adaptive:c:WIDTH:BUCKET, field name
--   reads    (name, bucket width ms)         the sum over the ten buckets ending now
--   openings (field, known epoch)            opened (epoch + 1, now) only at that epoch
--   heat     (biz, value)                    replaces {NS}:adaptive:heat:PROCESS
--
-- Returns {sums in read order, the breaker records (field, value, ...), the live processes,
-- the other live processes' heat (biz, value, age ms, ...)}.
--
-- Safe to run twice: the counts of a seq already counted are not added again; an opening
-- whose epoch moved on (by this very call's first run, or another node's) changes nothing;
-- the heat and the last sync are overwritten. Counter buckets expire after two windows.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, me, seq, live_ms = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local function bucket_key(width, n)
  return prefix .. 'adaptive:c:' .. width .. ':' .. n
end

local i = 5
local fresh = seq > tonumber(redis.call('HGET', KEYS[3], me) or '0')
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  local name, width, count = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  i = i + 3
  if fresh then
    local key = bucket_key(width, math.floor(now / width))
    redis.call('HINCRBY', key, name, count)
    redis.call('PEXPIRE', key, width * 20)
  end
end
if fresh then
  redis.call('HSET', KEYS[3], me, seq)
end

local sums = {}
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  local name, width = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local b = math.floor(now / width)
  local sum = 0
  for k = b - 9, b do
    local v = redis.call('HGET', bucket_key(width, k), name)
    if v then sum = sum + tonumber(v) end
  end
  sums[#sums + 1] = sum
end

n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  local field, known = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local rec = redis.call('HGET', KEYS[2], field)
  local epoch = 0
  if rec then epoch = tonumber(string.match(rec, '^(%d+)')) end
  if epoch == known then
    redis.call('HSET', KEYS[2], field, (epoch + 1) .. ' ' .. now)
  end
end

local heatkey = prefix .. 'adaptive:heat:' .. me
redis.call('DEL', heatkey)
n = tonumber(ARGV[i]); i = i + 1
if n > 0 then
  redis.call('HSET', heatkey, unpack(ARGV, i, i + 2 * n - 1))
  redis.call('PEXPIRE', heatkey, live_ms * 2)
end

redis.call('ZADD', KEYS[1], now, me)
-- Processes silent for an hour are forgotten, their seq with them (a push that late is
-- counted as new: the counts it carries are long out of every window).
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('HDEL', KEYS[3], m)
end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now - live_ms, '+inf', 'WITHSCORES')
local heat = {}
for j = 1, #live, 2 do
  local m, at = live[j], tonumber(live[j + 1])
  if m ~= me then
    local h = redis.call('HGETALL', prefix .. 'adaptive:heat:' .. m)
    for k = 1, #h, 2 do
      heat[#heat + 1] = h[k]
      heat[#heat + 1] = h[k + 1]
      heat[#heat + 1] = tostring(now - at)
    end
  end
end
return {sums, redis.call('HGETALL', KEYS[2]), #live / 2, heat, now}
