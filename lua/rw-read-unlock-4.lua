#!lua flags=allow-oom
-- Read-write lock, read side: release one read hold. Safe to send again after an unknown outcome
-- (see unlock-4.lua): with the expected hold count, a repeat of a release that landed changes nothing.
-- KEYS[1]  write hold           (see rw-read-lock-5.lua)
-- KEYS[2]  readers              zset owner -> expiry (server ms)
-- KEYS[3]  read hold counts     hash owner -> hold count
-- KEYS[4]  write wake channel   every waiting writer's process listens here
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms, re-applied while holds remain (the expiry is never shortened)
-- ARGV[3]  publish command      'publish' or 'spublish'
-- ARGV[4]  expected hold count before this release, as the client counts it ('' = unknown)
-- Returns  'released'     last hold of this owner; when no read or write hold is left, writers are woken
--          'decremented'  one hold released, others remain (or this release had already landed)
--          'not-locked'   no live read hold at all (this one expired, or was never taken)
--          'not-owner'    read-locked by others only; nothing changed
--          error BADARG before any write when an argument is unusable
--!include server-time.lua
--!include rw-readers.lua
--!include release-arguments.lua
local writeKey, readers, counts, writeChannel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, publish = ARGV[1], ARGV[3]
local lease, expected, bad = releaseArguments(owner, ARGV[2], publish, ARGV[4])
if bad then return bad end
local now = nowMs()
pruneReaders(readers, counts, now)
local count = tonumber(redis.call('hget', counts, owner))
local shortcut = releaseShortcut(count, function() return redis.call('zcard', readers) > 0 end, expected)
if shortcut then return shortcut end
if count > 1 then
  redis.call('hincrby', counts, owner, -1)
  local expiry = math.max(tonumber(redis.call('zscore', readers, owner)), now + lease)
  redis.call('zadd', readers, expiry, owner)
  touchReaders(readers, counts, now)
  return 'decremented'
end
redis.call('hdel', counts, owner)
redis.call('zrem', readers, owner)
touchReaders(readers, counts, now)
if redis.call('zcard', readers) == 0 and redis.call('exists', writeKey) == 0 then
  redis.call(publish, writeChannel, 'released')
end
return 'released'
