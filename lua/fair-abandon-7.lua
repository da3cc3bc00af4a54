#!lua flags=allow-oom
-- Fair lock: a wait ends without the lock (tryLock timed out, aborted, failed), or a hand-off names a
-- wait its process no longer has: leave the queue without a trace and, if the lock was handed to this
-- wait, hand it to the next live waiter. What was handed to it is passed on: an offer not accepted, or
-- the hold a hand-over recorded for it (a grant in the message), released by its id, and only when the
-- caller says that wait never took it. Any other hold of the owner stays untouched: this names one
-- wait, and only what was handed to that wait is passed on.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       (see fair-lock-7.lua)
-- KEYS[6]  hold ids             (see hold-ids.lua)
-- KEYS[7]  waiter holds         (see fair-lock-7.lua)
-- ARGV[1]  waiter id            the wait that ends ('<client id>:<nonce>')
-- ARGV[2]  owner id             the owner it waited for; '' when its process no longer knows (a hand-off
--                               to a wait it has no more: that wait is out of the queue already)
-- ARGV[3]  handed hold          the hold handed over to that wait that it did not take: its id (named by
--                               the message that came too late for the wait), '*' whichever it is (the
--                               wait ended without the lock, so it took none), '' none (an offer's late
--                               message: only an offer is passed on); no hold id is '*' or ''
-- ARGV[4]  acceptance lease in ms for the waiter the lock is passed on to
-- ARGV[5]  publish command      'publish' or 'spublish'
-- ARGV[6]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Returns  1 if the lock had been handed to this wait (it is passed on now), else 0;
--          error BADARG (nothing changed) for unusable arguments. Safe to send again: a hold
--          released once is recorded as ended, and a repeat finds nothing handed to the wait.
--!include fair-queue.lua
--!include release-hold.lua
local waiterId, owner, named = ARGV[1], ARGV[2], ARGV[3]
local bad = waiterIdProblem(waiterId) or (owner ~= '' and ownerProblem(owner))
  or acceptanceLeaseProblem(ARGV[4]) or publishCommandProblem(ARGV[5]) or idleTtlProblem(ARGV[6])
if bad then return bad end
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[5], acceptanceLease = tonumber(ARGV[4]), idle = tonumber(ARGV[6]), now = nowMs(),
  grants = KEYS[6], holds = KEYS[7],
}
if owner ~= '' then leaveQueue(fair, waiterEntry(owner, waiterId)) end
local handed = grantedTo(fair.lock)
if not handed then return 0 end
local handedOwner, handedWaiter = entryParts(handed)
if handedWaiter ~= waiterId or (owner ~= '' and handedOwner ~= owner) then return 0 end
if redis.call('hget', fair.lock, handedOwner) == '0' then
  -- An offer not accepted: no hold, passed on.
  redis.call('del', fair.lock)
  handToNextWaiter(fair)
  return 1
end
-- Accepted already, or taken otherwise: a hold, ended only by its release, unless it is the hold the
-- hand-over recorded for this wait and the caller says the wait never took it.
local hold = handedHold(fair.lock)
if not hold or named == '' or (named ~= '*' and named ~= hold) then return 0 end
if releaseHold(fair.lock, fair.grants, hold, nil, epochOf(fair.fence), 'whole') ~= HOLD_RELEASED then return 0 end
handToNextWaiter(fair)
return 1
