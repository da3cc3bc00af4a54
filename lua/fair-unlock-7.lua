#!lua flags=allow-oom
-- Fair lock: release one hold, named by its id (see hold-ids.lua and release-call.lua); on the last one
-- hand the lock straight to the next live waiter. Safe to send again after an unknown outcome, from
-- any process, at any time: a repeat replies what its first copy did, and no copy can touch another hold.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  fencing counter      also the epoch of the holds that count (see hold-ids.lua); kept as
--                               long as the hold a decrement leaves
-- KEYS[5]  channel prefix       the wait it is handed to is told on <KEYS[5]>:<its client id> (see
--                               fair-queue.lua: a grant in the message, or an offer)
-- KEYS[6]  hold ids             (see fair-lock-7.lua)
-- KEYS[7]  waiter holds         (see fair-lock-7.lua)
-- ARGV[1]  owner id             the hold's owner (checked against the hold's record)
-- ARGV[2]  hold id              the hold to release; with ARGV[6] 'any', this call's own id instead
-- ARGV[3]  lease in ms, re-applied while holds remain
-- ARGV[4]  acceptance lease in ms for the waiter the lock is handed to
-- ARGV[5]  publish command      'publish' or 'spublish'
-- ARGV[6]  'one' the hold ARGV[2]; 'any' any one hold of the owner (unlock by owner of a hold this
--          client did not record): the call's id ARGV[2] is then recorded as the hold it ended
-- ARGV[7]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Returns  'released'     last hold: handed over if anyone waits
--          'decremented'  one hold released, others of the owner remain
--          'not-locked'   not locked at all (expired, forced, or never taken)
--          'not-owner'    locked, but the hold is not there (ended without this release; a hand-off to
--                         a wait of the owner not accepted yet is no hold): nothing changed
--          (a repeat replies 'released' or 'decremented' as its first copy did)
--          error BADARG before any write when an argument is unusable
--!include fair-args.lua
--!include release-args.lua
--!include release-record.lua
local owner = ARGV[1]
local bad = ownerProblem(owner) or fairArgumentProblem(ARGV[3], ARGV[4]) or publishCommandProblem(ARGV[5])
  or idleTtlProblem(ARGV[7])
if bad then return bad end
local holdId, badId = holdIdArgument(ARGV[2], 'hold id')
if badId then return badId end
local which, badWhich = releaseModeArgument(ARGV[6])
if badWhich then return badWhich end
local lease, grants = tonumber(ARGV[3]), KEYS[6]
local epoch = epochOf(KEYS[4])

-- The uncontended case first, before the queue's steps are defined (each step a script defines costs
-- Redis something at every call): the call ends its own hold, live and its owner's only one, and
-- nobody is queued. Released so with waiters queued, the lock is handed on below.
local released = false
if which == 'one' then
  local kind, _, holder = readHold(grants, holdId, epoch)
  -- pcall: a string here is a simple lock's hold (another owner), not an error
  if (kind == 'g' or kind == 'e') and holder == owner and redis.pcall('hget', KEYS[1], owner) == '1' then
    redis.call('del', KEYS[1])
    endLastHold(grants, holdId)
    if not redis.call('lindex', KEYS[2], 0) then return 'released' end
    released = true
  end
end
--!include fair-hand-over.lua
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[5], acceptanceLease = tonumber(ARGV[4]), idle = tonumber(ARGV[7]), grants = grants,
  holds = KEYS[7],
}
if released then
  handToNextWaiter(fair)
  return 'released'
end

-- Anything else: a repeat, an unlock by owner, a hold with others of its owner left, one that ended.
--!include fair-queue.lua
--!include release-call.lua
local function holds() return ownerHolds(fair.lock, owner) end
local function locked() return redis.call('exists', fair.lock) == 1 end
-- A lock that expired under its holder left the queue untold: whatever this call ends, hand it on now.
local function handOnIfFree(reply)
  if not locked() then handToNextWaiter(fair) end
  return reply
end
local target, early = releaseTarget(grants, holdId, owner, which, epoch, holds, locked)
if not target then return handOnIfFree(early) end
-- The owner's last hold takes the whole lock hash with it, with the record of the wait it was granted to.
local did, outcome = releaseHold(fair.lock, grants, target, lease, epoch, 'whole')
local settled = settleReleaseCall(grants, holdId, target, which, did, outcome, holds, locked)
if settled then return handOnIfFree(settled) end
if did == HOLD_DECREMENTED then
  keepEpochWithLease(fair.lock, fair.fence)
  return 'decremented'
end
handToNextWaiter(fair)
return 'released'
