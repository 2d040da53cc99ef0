-- push rules: compare-and-set the rule set of record on its version.
--
-- KEYS[1] {NS}:rules (hash: version, files, source, at), KEYS[2] {NS}:rules:history (list),
-- KEYS[3] {NS}:rules:kept (zset: version -> the history's length at its latest acceptance)
-- ARGV[1] the prefix {NS}:, ARGV[2] mode: 'any' (no expectation), 'none' (seed: only if no
-- set is recorded), 'match' (If-Match: only if the current version is ARGV[3]),
-- ARGV[3] the expected version, ARGV[4] version, ARGV[5] files (JSON [[name, text], ...]),
-- ARGV[6] source, ARGV[7] at ms, ARGV[8] the history entry (JSON [version, source, at]),
-- ARGV[9] how many accepted versions keep their files.
--
-- Reads the current version. Answers {'unchanged'} if it is already this version, whatever
-- was expected: so a push run again after a lost reply does not turn into a conflict with
-- itself (and changes nothing). Answers {'conflict', current or ''} if the expectation fails.
-- Otherwise writes the set of record, the version's files ({NS}:rules:set:<version>, for
-- diffs and rollback), the history entry (LPUSH, never trimmed), ranks the version as the
-- latest accepted in {NS}:rules:kept, and deletes the files (never the history entries) of
-- the versions ranked past ARGV[9]; a store written before the ranking has its history
-- ranked once, oldest entry first, so its old files go the same way. Publishes the version on
-- {NS}:rules:pushed (a hint: a node also polls); answers {'done'}.
local prefix, mode, expected = ARGV[1], ARGV[2], ARGV[3]
local version, files, source, at = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local current = redis.call('HGET', KEYS[1], 'version')
if current == version then
  return {'unchanged'}
end
if (mode == 'match' and current ~= expected) or (mode == 'none' and current) then
  return {'conflict', current or ''}
end
redis.call('HSET', KEYS[1], 'version', version, 'files', files, 'source', source, 'at', at)
redis.call('HSET', prefix .. 'rules:set:' .. version, 'version', version, 'files', files, 'source', source, 'at', at)
redis.call('LPUSH', KEYS[2], ARGV[8])
local kept, limit = KEYS[3], tonumber(ARGV[9])
if redis.call('EXISTS', kept) == 0 then
  local entries = redis.call('LRANGE', KEYS[2], 0, -1)
  for i = #entries, 1, -1 do
    redis.call('ZADD', kept, #entries - i + 1, cjson.decode(entries[i])[1])
  end
else
  redis.call('ZADD', kept, redis.call('LLEN', KEYS[2]), version)
end
local excess = redis.call('ZCARD', kept) - limit
if excess > 0 then
  for _, old in ipairs(redis.call('ZRANGE', kept, 0, excess - 1)) do
    redis.call('DEL', prefix .. 'rules:set:' .. old)
  end
  redis.call('ZREMRANGEBYRANK', kept, 0, excess - 1)
end
redis.call('PUBLISH', prefix .. 'rules:pushed', version)
return {'done'}
