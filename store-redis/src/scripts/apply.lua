-- apply.lua: one batch of the journal's writes (`WriteOp`s), in order, each op atomic, and one
-- answer per op. The Rust side (`wire.rs`) encodes the ops; `rows.rs` names the row fields.
--
-- KEYS[1] is the namespace's prefix `{NS}:`. Every key the script touches is built from it
-- (`{NS}:r:<id>`, `{NS}:due`, ...), so every key carries the same hash tag and lives in the
-- slot of KEYS[1]: the script is legal on Redis Cluster, and the client routes it by KEYS[1].
--
-- ARGV is the ops, flat, each a tag and its arguments (n pairs: a count, then n field/value):
--   S id token due source position n pairs
--                                    schedule (token '' when the retry was not claimed;
--                                    source and position '' when the message has no offset)
--   A id source position at          acked (source and position '' without an offset)
--   F before limit                   prune the acked fates without an offset before `before`
--   D id source position n pairs     dead letter (source and position as a schedule's)
--   P source position                position
--   R id at operator reason bump n pairs m names
--                                    replay (bump 0) or redrive (bump 1): the fresh row's
--                                    fields, and the message fields to copy from the letter
--                                    (a name `?f`: copied only if the letter has `f`)
--   K id at operator reason          skip
--   E id at operator reason          expire
--   N id at operator reason          retry now
--   U id at operator reason action   an audit line only
--   L keep n (at entry)…             log n decisions (`at` the decision's time, `entry` its
--                                    JSON), then keep the newest `keep`
--   X group n entry…                 custody acks: XACK KEYS[2] group entry… (no answer)
-- (A position's time is not kept: nothing reads it. An acked fate's is, without an offset:
-- its score in acked-at, for F.)
--
-- Reads and checks: the whole call is parsed before anything is written, so a malformed call
-- writes nothing. Then each op reads what it decides on (the fate, the row's state and token,
-- the letter's status) before it writes, and its writes cannot fail (Lua does not roll back).
--
-- A message whose offset its source's position covers has its fate, whether or not a fate is
-- still kept: the position is the record of everything at or below it, and the acked fates it
-- covers are pruned. So a schedule or a dead letter of such a message (a late write of a node
-- that stalled, or of a claim that was reaped and fired again elsewhere: the message was acked
-- meanwhile) finds it acked, and loses ("first fate wins"), as it would to a kept fate.
--
-- Writes, per op (the answer in brackets):
--   S: a fate is known, or the source's position covers the message [known, fate]. The row is in flight under a token other than the op's
--      (the op has none, or another), or the op has a token and the row is not in flight (it
--      is due, or gone) [stale]. Else the row is replaced (state due, a new `seq` for scheduling order, `reaps`
--      0, `claims` kept), ZADD due, ZREM inflight [done].
--   A: the row goes either way; first fate wins [known, fate]; else f:<id> = acked, and with an
--      offset ZADD acked:<source> position id, for the source's position to prune, without one
--      ZADD acked-at at id, for F to prune [done].
--   F: the first `limit` entries of acked-at scored below `before` go, with their fates (a
--      fate that is no longer `acked` is left alone) [done].
--   D: the row goes either way; first fate wins (a position that covers the message is an
--      acked fate) [known, fate]; else dead letter n = INCR
--      dl:seq (status dead), ZADD dl, dl:last:<id> = n, f:<id> = dead [done].
--   P: the source's position moves forward only; the acked fates of the source at or below
--      the stored position are pruned (DEL f:<id>, ZREMRANGEBYSCORE) [done]. Fates stay
--      bounded: what an acked message leaves is its entry in acked:<source> until then.
--   R: no letter [nodl]; the latest letter is not open (`dead`, or for a replay also
--      `expired`) [handled, status]; else the letter is replayed, the fate deleted, a fresh
--      row written (due at once, the letter's `redrives` plus the bump), an audit line
--      [replayed, the row's fields].
--   K: as a replay's refusals; else the letter is skipped, an audit line [skipped, n, its fields].
--   E: as a redrive's refusals; else the letter is expired, an audit line [done].
--   N: the row is not due (gone, or in flight) [noretry]; else it is due at `at`, an audit
--      line [done].
--   U: an audit line, naming the message's latest letter if it has one [done].
--   L: the entries numbered by INCRBY decisions:seq n and RPUSHed to the list decisions,
--      in order, each as `seq at entry` (decimal, a space, decimal, a space, the JSON); then
--      the list is trimmed to its newest `keep` (LTRIM -keep -1; `keep` 0 deletes it)
--      [done]. Nothing else is read or written: no row, no fate, no audit line. (The seq
--      lets a reader that pages from the list's end skip what appends shifted under it.)
--   X: after every other op of the call, the entries are acknowledged to the group of the
--      stream KEYS[2] (the store's custody of a stream source's messages: the schedules and
--      dead letters of this call, whatever their answers, since the store has each message
--      either way) [no answer: X is not a WriteOp].
-- When a schedule made the head of the due set, `{NS}:wake` is published (a hint only).
--
-- Safe to run twice (a reply lost to a dropped connection): a second run finds the fates the
-- first one wrote (known), a schedule is an upsert (a stale one is refused again), positions
-- only move forward and pruning what is pruned is nothing, and an operator action finds its
-- letter handled (handled). The decision log is the exception, by design: it is a sample, not
-- a record, and a second run appends its entries again (then trims to `keep` as the first
-- did). The store ends as after one run; only the answers differ, as they
-- do on SQLite.

local P = KEYS[1]
local DUE, INFLIGHT = P .. 'due', P .. 'inflight'

-- ---- parse ---------------------------------------------------------------------------------

local ops, xacks, i, n = {}, {}, 1, #ARGV
local function take()
  if i > n then error('apply.lua: malformed call: ARGV ends at ' .. n) end
  i = i + 1
  return ARGV[i - 1]
end
local function take_pairs()
  local count = tonumber(take())
  if not count then error('apply.lua: malformed call: no field count at ARGV ' .. (i - 1)) end
  local pairs = {}
  for k = 1, 2 * count do pairs[k] = take() end
  return pairs
end
while i <= n do
  local op = { tag = take() }
  local t = op.tag
  if t == 'X' then
    if not KEYS[2] then error('apply.lua: malformed call: custody acks without a stream key') end
    op.group = take()
    local count = tonumber(take())
    if not count then error('apply.lua: malformed call: no entry count at ARGV ' .. (i - 1)) end
    op.entries = {}
    for k = 1, count do op.entries[k] = take() end
  elseif t == 'S' then
    op.id, op.token, op.due, op.source, op.position = take(), take(), take(), take(), take()
    op.fields = take_pairs()
  elseif t == 'A' then
    op.id, op.source, op.position, op.at = take(), take(), take(), take()
  elseif t == 'F' then
    op.before, op.limit = take(), take()
  elseif t == 'D' then
    op.id, op.source, op.position = take(), take(), take()
    op.fields = take_pairs()
  elseif t == 'P' then
    op.source, op.position = take(), take()
  elseif t == 'L' then
    op.keep = take()
    if not tonumber(op.keep) then error('apply.lua: malformed call: no keep at ARGV ' .. (i - 1)) end
    local count = tonumber(take())
    if not count then error('apply.lua: malformed call: no decision count at ARGV ' .. (i - 1)) end
    op.entries = {}
    for k = 1, 2 * count do op.entries[k] = take() end
  elseif t == 'R' or t == 'K' or t == 'E' or t == 'N' or t == 'U' then
    op.id, op.at, op.operator, op.reason = take(), take(), take(), take()
    if t == 'U' then op.action = take() end
    if t == 'R' then
      op.bump = tonumber(take())
      op.fields = take_pairs()
      local count = tonumber(take())
      op.copy, op.optional = {}, {}
      for k = 1, count do
        local name = take()
        op.optional[k] = string.sub(name, 1, 1) == '?'
        op.copy[k] = op.optional[k] and string.sub(name, 2) or name
      end
    end
  else
    error('apply.lua: malformed call: unknown op ' .. tostring(t) .. ' at ARGV ' .. (i - 1))
  end
  if t == 'X' then xacks[#xacks + 1] = op else ops[#ops + 1] = op end
end

-- ---- the ops -------------------------------------------------------------------------------

local head -- the earliest due time this call scheduled (a number), for the wake hint

local function fate_of(id)
  return redis.call('GET', P .. 'f:' .. id)
end

-- The message's fate: the one kept, or `acked` if its source's committed position covers its
-- offset (`source` '' when it has none); false if it has none.
local function fate_or_covered(op)
  local fate = fate_of(op.id)
  if fate or op.source == '' then return fate end
  local stored = redis.call('HGET', P .. 'pos', op.source)
  if stored and tonumber(op.position) <= tonumber(stored) then return 'acked' end
  return false
end

-- A row is in the due or the in-flight set while it exists, so with no row there is no entry
-- to drop (most fates: a message that never failed). An entry left without its row (a script
-- that failed half-way) is dropped by claim.lua or reap.lua when it comes up.
local function drop_row(id)
  if redis.call('DEL', P .. 'r:' .. id) == 1 then
    redis.call('ZREM', DUE, id)
    redis.call('ZREM', INFLIGHT, id)
  end
end

-- The row's `state`, `token` and `claims` (each false if the row does not exist).
local function row_state(id)
  return redis.call('HMGET', P .. 'r:' .. id, 'state', 'token', 'claims')
end

-- Replaces the row (whose state `st` is) with `fields` (field, value, ...), due at `due`
-- (decimal text). A new row (most) costs no DEL and no ZREM.
local function put_row(id, due, fields, st)
  local row = P .. 'r:' .. id
  local seq = redis.call('INCR', P .. 'seq')
  if st[1] then redis.call('DEL', row) end
  redis.call('HSET', row, 'seq', seq, 'state', 'due', 'reaps', 0, 'claims', st[3] or 0,
    unpack(fields))
  redis.call('ZADD', DUE, due, id)
  if st[1] == 'inflight' then redis.call('ZREM', INFLIGHT, id) end
  local d = tonumber(due)
  if not head or d < head then head = d end
end

local function schedule(op)
  local fate = fate_or_covered(op)
  if fate then return { 'known', fate } end
  local st = row_state(op.id)
  local inflight = st[1] == 'inflight'
  if inflight and st[2] ~= op.token then return { 'stale' } end
  if op.token ~= '' and not inflight then return { 'stale' } end
  put_row(op.id, op.due, op.fields, st)
  return { 'done' }
end

local function acked(op)
  -- First fate wins, in one command: the fate is written only if there is none, and the one
  -- there was is answered (SET NX GET: Redis 7.0).
  local fate = redis.call('SET', P .. 'f:' .. op.id, 'acked', 'NX', 'GET')
  drop_row(op.id)
  if fate then return { 'known', fate } end
  if op.source ~= '' then
    redis.call('ZADD', P .. 'acked:' .. op.source, op.position, op.id)
  else
    redis.call('ZADD', P .. 'acked-at', op.at, op.id)
  end
  return { 'done' }
end

local function prune_fates(op)
  local set = P .. 'acked-at'
  local old = redis.call('ZRANGE', set, '-inf', '(' .. op.before, 'BYSCORE', 'LIMIT', 0, op.limit)
  for _, id in ipairs(old) do
    local fate_key = P .. 'f:' .. id
    if redis.call('GET', fate_key) == 'acked' then redis.call('DEL', fate_key) end
  end
  -- They are the set's lowest `#old` by rank (no unpack: a Lua call takes at most 8,000).
  if #old > 0 then redis.call('ZREMRANGEBYRANK', set, 0, #old - 1) end
  return { 'done' }
end

local function dead_letter(op)
  local fate = fate_or_covered(op)
  drop_row(op.id)
  if fate then return { 'known', fate } end
  local dl = redis.call('INCR', P .. 'dl:seq')
  redis.call('HSET', P .. 'dl:' .. dl, 'status', 'dead', unpack(op.fields))
  redis.call('ZADD', P .. 'dl', dl, dl)
  redis.call('SET', P .. 'dl:last:' .. op.id, dl)
  redis.call('SET', P .. 'f:' .. op.id, 'dead')
  return { 'done' }
end

local function position(op)
  local stored = redis.call('HGET', P .. 'pos', op.source)
  -- Compared as numbers (exact: the Rust side keeps positions below 2^53), passed on as text.
  if not stored or tonumber(op.position) > tonumber(stored) then
    redis.call('HSET', P .. 'pos', op.source, op.position)
    stored = op.position
  end
  local acked_set = P .. 'acked:' .. op.source
  local covered = redis.call('ZRANGE', acked_set, '-inf', stored, 'BYSCORE')
  for _, id in ipairs(covered) do redis.call('DEL', P .. 'f:' .. id) end
  if #covered > 0 then redis.call('ZREMRANGEBYSCORE', acked_set, '-inf', stored) end
  return { 'done' }
end

-- The message's latest letter if it is open (`dead`, or with `or_expired` also `expired`): its
-- number and key, or the refusal.
local function open_letter(id, or_expired)
  local dl = redis.call('GET', P .. 'dl:last:' .. id)
  if not dl then return nil, nil, { 'nodl' } end
  local key = P .. 'dl:' .. dl
  local status = redis.call('HGET', key, 'status')
  if status ~= 'dead' and not (or_expired and status == 'expired') then
    return nil, nil, { 'handled', status }
  end
  return dl, key, nil
end

-- An audit line; `dl` (the letter's number) may be false: an action on a scheduled retry.
local function audit(action, op, dl)
  local a = redis.call('INCR', P .. 'audit:seq')
  local line = P .. 'audit:' .. a
  redis.call('HSET', line, 'at_ms', op.at, 'action', action, 'message_id', op.id,
    'operator', op.operator, 'reason', op.reason)
  if dl then redis.call('HSET', line, 'dead_letter_id', dl) end
  redis.call('ZADD', P .. 'audit', a, a)
  redis.call('ZADD', P .. 'audit:msg:' .. op.id, a, a)
end

local function replay(op)
  local dl, key, refused = open_letter(op.id, op.bump == 0)
  if refused then return refused end
  local copied = redis.call('HMGET', key, unpack(op.copy))
  local fields = op.fields
  for k, name in ipairs(op.copy) do
    -- A letter without its message is corrupt: refuse before writing anything for it.
    if copied[k] then
      fields[#fields + 1] = name
      fields[#fields + 1] = copied[k]
    elseif not op.optional[k] then
      return { 'corrupt', 'dead letter ' .. dl .. ' has no ' .. name }
    end
  end
  fields[#fields + 1] = 'redrives'
  fields[#fields + 1] = tostring((tonumber(redis.call('HGET', key, 'redrives')) or 0) + op.bump)
  redis.call('HSET', key, 'status', 'replayed')
  redis.call('DEL', P .. 'f:' .. op.id)
  put_row(op.id, op.at, fields, row_state(op.id))
  audit('replay', op, dl)
  local out = redis.call('HGETALL', P .. 'r:' .. op.id)
  table.insert(out, 1, 'replayed')
  return out
end

local function skip(op)
  local dl, key, refused = open_letter(op.id, true)
  if refused then return refused end
  redis.call('HSET', key, 'status', 'skipped')
  audit('skip', op, dl)
  local out = redis.call('HGETALL', key)
  table.insert(out, 1, dl)
  table.insert(out, 1, 'skipped')
  return out
end

local function expire(op)
  local dl, key, refused = open_letter(op.id, false)
  if refused then return refused end
  redis.call('HSET', key, 'status', 'expired')
  audit('expire', op, dl)
  return { 'done' }
end

local function retry_now(op)
  local st = row_state(op.id)
  if st[1] ~= 'due' then return { 'noretry' } end
  redis.call('HSET', P .. 'r:' .. op.id, 'due_ms', op.at)
  redis.call('ZADD', DUE, op.at, op.id)
  local d = tonumber(op.at)
  if not head or d < head then head = d end
  audit('retry_now', op, false)
  return { 'done' }
end

local function audit_only(op)
  audit(op.action, op, redis.call('GET', P .. 'dl:last:' .. op.id))
  return { 'done' }
end

local function log_decisions(op)
  local log = P .. 'decisions'
  local count = #op.entries / 2
  if count > 0 then
    local seq = redis.call('INCRBY', P .. 'decisions:seq', count) - count
    -- In chunks: a Lua call takes at most 8,000 arguments.
    for from = 1, count, 1000 do
      local items = {}
      for k = from, math.min(from + 999, count) do
        -- %d: the number as an integer (exact below 2^53), never in an exponent form.
        items[#items + 1] = string.format('%d', seq + k) .. ' ' .. op.entries[2 * k - 1] .. ' '
          .. op.entries[2 * k]
      end
      redis.call('RPUSH', log, unpack(items))
    end
  end
  if op.keep == '0' then
    redis.call('DEL', log)
  else
    redis.call('LTRIM', log, '-' .. op.keep, -1)
  end
  return { 'done' }
end

local RUN = { S = schedule, A = acked, D = dead_letter, P = position, R = replay, K = skip,
  E = expire, N = retry_now, U = audit_only, F = prune_fates, L = log_decisions }
local answers = {}
for k, op in ipairs(ops) do answers[k] = RUN[op.tag](op) end
for _, op in ipairs(xacks) do
  -- In chunks: a Lua call takes at most 8,000 arguments.
  for from = 1, #op.entries, 1000 do
    redis.call('XACK', KEYS[2], op.group, unpack(op.entries, from, math.min(from + 999, #op.entries)))
  end
end

if head then
  local first = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
  if first[2] and tonumber(first[2]) == head then
    redis.call('PUBLISH', P .. 'wake', first[2])
  end
end
return answers
