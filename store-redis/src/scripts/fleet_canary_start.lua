-- Starts the fleet's canary unless one is running or held.
-- KEYS[1] {NS}:canary  KEYS[2] {NS}:canary:arms
-- ARGV[1] spec (the product's JSON)
-- Answers {1, epoch, since_ms} when started, {0, epoch, state} when one is active.
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'running' or state == 'held' then
  return {0, tonumber(redis.call('HGET', KEYS[1], 'epoch')), state}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'state', 'running', 'spec', ARGV[1], 'since_ms', now, 'reason', '', 'arms', '')
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'epoch', epoch)
return {1, epoch, now}
