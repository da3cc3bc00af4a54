#!lua flags=allow-oom
-- Read-write lock, write side: release one write hold; on the last one wake the waiting readers and,
-- unless the writer still reads (downgrade), the waiting writers. Safe to send again (see unlock-4.lua).
-- KEYS[1]  write hold           hash owner -> hold count (see rw-read-lock-5.lua)
-- KEYS[2]  readers              zset owner -> expiry (server ms)
-- KEYS[3]  read wake channel    every waiting reader's process listens here
-- KEYS[4]  write wake channel   every waiting writer's process listens here
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms, re-applied while holds remain (whole number in 1..31536000000)
-- ARGV[3]  publish command      'publish' or 'spublish'
-- ARGV[4]  expected hold count before this release, as the client counts it ('' = unknown)
-- Returns  'released'     last hold
--          'decremented'  one hold released, others remain (or this release had already landed)
--          'not-locked'   not write-locked (expired or never taken)
--          'not-owner'    write-locked by another owner; nothing changed
--          error BADARG before any write when an argument is unusable
--!include server-time.lua
--!include rw-readers.lua
--!include release-arguments.lua
local writeKey, readers, readChannel, writeChannel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, publish = ARGV[1], ARGV[3]
local lease, expected, bad = releaseArguments(owner, ARGV[2], publish, ARGV[4])
if bad then return bad end
local count = tonumber(redis.call('hget', writeKey, owner))
local shortcut = releaseShortcut(count, function() return redis.call('exists', writeKey) == 1 end, expected)
if shortcut then return shortcut end
if count > 1 then
  redis.call('hincrby', writeKey, owner, -1)
  if redis.call('pttl', writeKey) < lease then redis.call('pexpire', writeKey, lease) end
  return 'decremented'
end
-- Published before the delete (see simple-unlock-4.lua): a refused publish leaves the hold as it was.
redis.call(publish, readChannel, 'released')
if liveReaders(readers, nowMs()) == 0 then redis.call(publish, writeChannel, 'released') end
redis.call('del', writeKey)
return 'released'
