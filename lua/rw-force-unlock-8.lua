#!lua flags=allow-oom
-- Read-write lock: delete the write hold or every read hold, whoever holds them, and wake the waiters.
-- KEYS[1]  write hold           (see rw-read-lock-6.lua)
-- KEYS[2]  readers
-- KEYS[3]  read hold counts
-- KEYS[4]  read wake channel
-- KEYS[5]  write wake channel
-- KEYS[6]  force calls          (see force-once.lua)
-- KEYS[7]  write hold ids       (see rw-write-lock-7.lua): their live records end with the write hold,
-- KEYS[8]  read hold ids        (see rw-readers.lua) with the read holds, so that every hold's release
--                               finds it gone (and says so); ended records stay (endLiveHolds)
-- ARGV[1]  side                 'write' or 'read'
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  call id              the same on a repeat of this call, which then changes nothing
-- Returns  1 deleted, 0 that side was not locked (a repeat: what the first run returned);
--          error BADARG (nothing changed) for unusable arguments
--!include server-time.lua
--!include rw-readers.lua
--!include force-once.lua
local writeKey, readers, counts, readChannel, writeChannel, forced = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local writeGrants, readGrants = KEYS[7], KEYS[8]
local side, publish = ARGV[1], ARGV[2]
if side ~= 'write' and side ~= 'read' then
  return redis.error_reply('BADARG side must be write or read, got ' .. tostring(side))
end
if publish ~= 'publish' and publish ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(publish))
end
local callId, bad = forceCallArgument(ARGV[3])
if bad then return bad end
local earlier = earlierForce(forced, callId)
if earlier then return earlier end
local now = nowMs()
local deleted
if side == 'write' then
  deleted = redis.call('del', writeKey) == 1
  if deleted then endLiveHolds(writeGrants) end
else
  pruneReaders(readers, counts, readGrants, now)
  deleted = liveReaders(readers, now) > 0
  if deleted then
    redis.call('del', readers, counts)
    endLiveHolds(readGrants)
  end
end
if not deleted then return rememberForce(forced, callId, 0) end
redis.call(publish, readChannel, 'force')
if liveReaders(readers, now) == 0 and redis.call('exists', writeKey) == 0 then
  redis.call(publish, writeChannel, 'force')
end
return rememberForce(forced, callId, 1)
