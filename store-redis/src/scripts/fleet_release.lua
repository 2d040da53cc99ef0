-- release: a node gives one source partition back.
--
-- KEYS[1] {NS}:src:<source>/<p>
-- ARGV[1] node, ARGV[2] instance, ARGV[3] the epoch it holds the partition at
--
-- The caller must have stopped taking messages from the partition and committed its position
-- first: from this call on another node may take it (with a new epoch) and start from the
-- committed position. Checks that the caller still holds it at that epoch (0 if not: it was
-- taken over already, or released by an earlier run of this call); then clears the owner
-- and keeps the epoch, so the next owner's INCR moves past it. Running it twice: 0 the second
-- time, nothing written.
local f = redis.call('HMGET', KEYS[1], 'owner', 'instance', 'epoch')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or f[3] ~= ARGV[3] then
  return 0
end
redis.call('HDEL', KEYS[1], 'owner', 'instance', 'lease_ms')
return 1
