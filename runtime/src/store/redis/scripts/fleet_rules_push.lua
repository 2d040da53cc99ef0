-- push rules: compare-and-set the rule set of record on its version.
--
-- KEYS[1] {NS}:rules (hash: version, files, source, at), KEYS[2] {NS}:rules:history (list)
-- ARGV[1] the prefix {NS}:, ARGV[2] mode: 'any' (no expectation), 'none' (seed: only if no
-- set is recorded), 'match' (If-Match: only if the current version is ARGV[3]),
-- ARGV[3] the expected version, ARGV[4] version, ARGV[5] files (JSON [[name, text], ...]),
-- ARGV[6] source, ARGV[7] at ms, ARGV[8] the history entry (JSON [version, source, at]).
--
-- Reads the current version. Answers {'unchanged'} if it is already this version, whatever
-- was expected: so a push run again after a lost reply does not turn into a conflict with
-- itself. Answers {'conflict', current or ''} if the expectation fails. Otherwise writes the
-- set of record, the version's files ({NS}:rules:set:<version>, for rollback), the history
-- entry (LPUSH, never trimmed), and publishes the version on {NS}:rules:pushed (a hint: a
-- node also polls); answers {'done'}.
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
redis.call('PUBLISH', prefix .. 'rules:pushed', version)
return {'done'}
