#!lua flags=allow-oom
-- Semaphore: give back the permits of one hold and wake the process that has waited longest (it wakes
-- one of its waiters; a waiter granted with permits left over wakes the next, see semaphore-acquire-5.lua).
-- The hold member is unique to one acquisition, so sending the release again is harmless.
-- KEYS[1]  holds              (see semaphore-acquire-5.lua)
-- KEYS[2]  channel prefix     (see semaphore-acquire-5.lua)
-- KEYS[3]  waiting processes  (see semaphore-acquire-5.lua)
-- ARGV[1]  hold member        '<permits>:<hold id>'
-- ARGV[2]  publish command    'publish' or 'spublish'
-- Returns  'released', or 'not-locked' when not held (its lease had ended, or it was released before);
--          error BADARG (nothing changed) for unusable arguments
--!include server-time.lua
--!include semaphore-holds.lua
--!include publish-command.lua
--!include wake-one-process.lua
local holdsKey, channel, waitingKey, member, publish = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]
if not member or permitsOf(member) < 1 then
  return redis.error_reply('BADARG hold member must be "<permits>:<hold id>", got ' .. tostring(member))
end
local badPublish = publishCommandProblem(publish)
if badPublish then return badPublish end
local freed = reclaimExpired(holdsKey, nowMs())
local released = redis.call('zrem', holdsKey, member)
if released == 1 or freed > 0 then wakeOneProcess(waitingKey, channel, publish, 'free') end
return released == 1 and 'released' or 'not-locked'
