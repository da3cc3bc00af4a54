#!lua flags=allow-oom
-- Reentrant or simple lock: delete the lock whoever holds it, and hand it over to a waiting process.
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel       (see unlock-6.lua and simple-unlock-4.lua)
-- KEYS[3]  waiting processes    (see lock-5.lua)
-- KEYS[4]  hand-over            (see hand-over.lua)
-- KEYS[5]  force calls          (see force-once.lua)
-- KEYS[6]  hold ids             (see hold-ids.lua): every live hold's record ends with the lock, so
--                               its release finds it gone (and says so); ended records stay (endLiveHolds)
-- ARGV[1]  publish command      'publish' or 'spublish'
-- ARGV[2]  message
-- ARGV[3]  call id              the same on a repeat of this call, which then changes nothing
-- Returns  1 deleted, 0 was not locked (a repeat: what the first run returned);
--          error BADARG (nothing changed) for an unknown publish command or an empty call id
--!include hand-over.lua
--!include force-once.lua
--!include hold-ids.lua
if ARGV[1] ~= 'publish' and ARGV[1] ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(ARGV[1]))
end
local callId, bad = forceCallArgument(ARGV[3])
if bad then return bad end
local earlier = earlierForce(KEYS[5], callId)
if earlier then return earlier end
if redis.call('del', KEYS[1]) == 1 then
  endLiveHolds(KEYS[6])
  handOver(KEYS[3], KEYS[2], KEYS[4], ARGV[1], ARGV[2] or '')
  redis.call(ARGV[1], KEYS[2], ARGV[2] or '')
  return rememberForce(KEYS[5], callId, 1)
end
return rememberForce(KEYS[5], callId, 0)
