#!lua flags=allow-oom
-- Read-write lock, write side: release one write hold, named by its id (see hold-ids.lua and
-- release-call.lua); on the last one wake the waiting readers and, unless the writer still reads
-- (downgrade), the waiting writers. Safe to send again after an unknown outcome, from any process, at
-- any time: a repeat replies what its first copy did, and no copy can touch another hold.
-- KEYS[1]  write hold           hash owner -> hold count (see rw-read-lock-6.lua)
-- KEYS[2]  readers              zset owner -> expiry (server ms)
-- KEYS[3]  read wake channel    every waiting reader's process listens here
-- KEYS[4]  write wake channel   every waiting writer's process listens here
-- KEYS[5]  write hold ids       hold id -> its record (see rw-write-lock-7.lua)
-- KEYS[6]  fencing counter      the epoch of the write hold held now (see hold-ids.lua); kept as long as the
--                               hold a decrement leaves
-- ARGV[1]  owner id             the hold's owner (checked against the hold's record)
-- ARGV[2]  hold id              the hold to release; with ARGV[5] 'any', this call's own id instead
-- ARGV[3]  lease in ms, re-applied while holds remain (whole number in 1..31536000000)
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  'one' the hold ARGV[2]; 'any' any one write hold of the owner (unlock by owner of a hold
--          this client did not record): the call's id ARGV[2] is then recorded as the hold it ended
-- Returns  'released'     last hold
--          'decremented'  one hold released, others of the owner remain
--          'not-locked'   not write-locked (expired, forced, or never taken)
--          'not-owner'    write-locked, but the hold is not there (ended without this release);
--                         nothing changed
--          (a repeat replies 'released' or 'decremented' as its first copy did)
--          error BADARG before any write when an argument is unusable
--!include server-time.lua
--!include publish-command.lua
--!include rw-readers.lua
--!include release-call.lua
local writeKey, readers, readChannel, writeChannel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local grants, fence = KEYS[5], KEYS[6]
local owner, publish = ARGV[1], ARGV[4]
local call, bad = releaseCallArguments(owner, ARGV[2], ARGV[3], publish, ARGV[5])
if not call then return bad end
local holdId, lease, which = call.holdId, call.lease, call.which

local function ownerHolds() return redis.call('hexists', writeKey, owner) == 1 end
local function locked() return redis.call('exists', writeKey) == 1 end
local epoch = epochOf(fence)

local target, early = releaseTarget(grants, holdId, owner, which, epoch, ownerHolds, locked)
if not target then return early end
-- The last hold: readers and writers are told before anything is deleted, so a refused publish
-- leaves the hold as it was.
local kind, _, holder = readHold(grants, target, epoch)
if (kind == 'g' or kind == 'e') and holder == owner and redis.call('hget', writeKey, owner) == '1' then
  redis.call(publish, readChannel, 'released')
  if liveReaders(readers, nowMs()) == 0 then redis.call(publish, writeChannel, 'released') end
end
local did, outcome = releaseHold(writeKey, grants, target, lease, epoch)
local settled = settleReleaseCall(grants, holdId, target, which, did, outcome, ownerHolds, locked)
if settled then return settled end
if did == HOLD_DECREMENTED then
  keepEpochWithLease(writeKey, fence)
  return 'decremented'
end
return 'released'
