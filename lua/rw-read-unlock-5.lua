#!lua flags=allow-oom
-- Read-write lock, read side: release one read hold, named by its id (see hold-ids.lua and
-- release-call.lua). Safe to send again after an unknown outcome, from any process, at any time: a
-- repeat replies what its first copy did, and no copy can touch another hold.
-- KEYS[1]  write hold           (see rw-read-lock-6.lua)
-- KEYS[2]  readers              zset owner -> expiry (server ms)
-- KEYS[3]  read hold counts     hash owner -> hold count
-- KEYS[4]  write wake channel   every waiting writer's process listens here
-- KEYS[5]  read hold ids        hold id -> its record (see hold-ids.lua)
-- ARGV[1]  owner id             the hold's owner (checked against the hold's record)
-- ARGV[2]  hold id              the hold to release; with ARGV[5] 'any', this call's own id instead
-- ARGV[3]  lease in ms, re-applied while holds remain (whole number in 1..31536000000; the expiry is
--          never shortened)
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  'one' the hold ARGV[2]; 'any' any one read hold of the owner (unlock by owner of a hold
--          this client did not record): the call's id ARGV[2] is then recorded as the hold it ended
-- Returns  'released'     last read hold of this owner; when no read or write hold is left, writers are woken
--          'decremented'  one hold released, others of the owner remain
--          'not-locked'   no live read hold at all (this one expired, was forced, or was never taken)
--          'not-owner'    read-locked, but the hold is not there (ended without this release);
--                         nothing changed
--          (a repeat replies 'released' or 'decremented' as its first copy did)
--          error BADARG before any write when an argument is unusable
--!include server-time.lua
--!include publish-command.lua
--!include rw-readers.lua
--!include release-call.lua
local writeKey, readers, counts, writeChannel, grants = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, publish = ARGV[1], ARGV[4]
local call, bad = releaseCallArguments(owner, ARGV[2], ARGV[3], publish, ARGV[5])
if not call then return bad end
local holdId, lease, which = call.holdId, call.lease, call.which

local now = nowMs()
pruneReaders(readers, counts, grants, now)
local function ownerHolds() return redis.call('hexists', counts, owner) == 1 end
local function locked() return redis.call('exists', readers) == 1 end
-- Every path below may have changed `grants`: the read keys live as long (see rw-readers.lua).
local function replied(reply)
  touchReaders(readers, counts, grants, now)
  return reply
end

local target, early = releaseTarget(grants, holdId, owner, which, nil, ownerHolds, locked)
if not target then return replied(early) end
-- The last hold of the last reader, no writer: writers are told before anything is deleted, so a
-- refused publish leaves the hold as it was.
if tonumber(redis.call('hget', counts, owner)) == 1 and redis.call('zcard', readers) == 1 then
  local kind, _, holder = readHold(grants, target)
  if (kind == 'g' or kind == 'e') and holder == owner and redis.call('exists', writeKey) == 0 then
    redis.call(publish, writeChannel, 'released')
  end
end
local did, outcome = releaseHold(counts, grants, target)
local settled = settleReleaseCall(grants, holdId, target, which, did, outcome, ownerHolds, locked)
if settled then return replied(settled) end
if did == HOLD_DECREMENTED then
  redis.call('zadd', readers, math.max(tonumber(redis.call('zscore', readers, owner)), now + lease), owner)
  -- The owner's holds left are recorded in `grants`: it must last as long as the expiry just made.
  keepGrants(grants, lease)
  return replied('decremented')
end
redis.call('zrem', readers, owner)
return replied('released')
