#!lua flags=allow-oom
-- Semaphore: give back the permits of one hold and wake a waiting group that can take the permits now
-- free (the longest waiting of those; a waiter granted with permits left over wakes the next, see
-- semaphore-acquire-5.lua). The hold member is unique to one acquisition, so sending the release again
-- is harmless, and a repeat replies as the first run did: an application's ioredis client sends a
-- command again on its new connection when the old one died before the reply came, and the caller
-- hears the repeat's reply, not the first run's.
-- KEYS[1]  holds              (see semaphore-acquire-5.lua)
-- KEYS[2]  run-time limit     (see semaphore-acquire-5.lua)
-- KEYS[3]  channel prefix     (see semaphore-acquire-5.lua)
-- KEYS[4]  waiting groups     (see semaphore-acquire-5.lua)
-- KEYS[5]  recent releases    <prefix>:{<name>}:permits:released  hold member -> time (ms, server) until
--                             which a repeat of its release still replies 'released'
-- ARGV[1]  hold member        '<permits>:<hold id>'
-- ARGV[2]  configured limit   whole number in 1..2147483647, used when KEYS[2] is not set
-- ARGV[3]  publish command    'publish' or 'spublish'
-- ARGV[4]  memory in ms       how long a repeat still replies 'released' (the caller waits no longer for
--                             a reply: its operation timeout); whole number in 1..31536000000
-- Returns  'released' (also for a repeat within the memory), or 'not-locked' when not held (its lease
--          had ended, or it was released longer ago); error BADARG (nothing changed) for unusable arguments
--!include server-time.lua
--!include semaphore-holds.lua
--!include semaphore-waiting.lua
local holdsKey, limitKey, channel, waitingKey, releasedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local member, configured, publish, memory = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
if not member or permitsOf(member) < 1 then
  return redis.error_reply('BADARG hold member must be "<permits>:<hold id>", got ' .. tostring(member))
end
local badLimit = limitAndPublishProblem(ARGV[2], publish)
if badLimit then return badLimit end
if not wholeNumber(memory, 1, 31536000000) then
  return redis.error_reply('BADARG memory must be whole ms in 1..31536000000, got ' .. tostring(ARGV[4]))
end

local now = nowMs()
local freed = reclaimExpired(holdsKey, now)
local released = redis.call('zrem', holdsKey, member) == 1
if released or freed > 0 then
  wakeGroupThatFits(waitingKey, channel, publish, currentLimit(limitKey, configured) - permitsInUse(holdsKey, now))
end
if released then
  redis.call('zremrangebyscore', releasedKey, '-inf', now)
  redis.call('zadd', releasedKey, now + memory, member)
  if redis.call('pttl', releasedKey) < memory then redis.call('pexpire', releasedKey, memory) end
  return 'released'
end
local remembered = tonumber(redis.call('zscore', releasedKey, member))
return remembered and remembered > now and 'released' or 'not-locked'
