#!lua flags=allow-oom
-- Fair lock: a wait ends without the lock (tryLock timed out, aborted, failed), or a hand-off names a
-- wait its process no longer has: leave the queue without a trace and, if the lock was handed to this
-- wait and not accepted, hand it to the next live waiter. Any hold of the owner stays untouched: this
-- names one wait, and only what was handed to that wait is passed on.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       (see fair-lock-6.lua)
-- ARGV[1]  waiter id            the wait that ends ('<client id>:<nonce>')
-- ARGV[2]  owner id             the owner it waited for; '' when its process no longer knows (a hand-off
--                               to a wait it has no more: that wait is out of the queue already)
-- ARGV[3]  acceptance lease in ms for the waiter the lock is passed on to
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Returns  1 if the lock had been handed to this wait (it is passed on now), else 0;
--          error BADARG (nothing changed) for unusable arguments. Safe to send again.
--!include fair-queue.lua
local waiterId, owner = ARGV[1], ARGV[2]
local bad = waiterIdProblem(waiterId) or (owner ~= '' and ownerProblem(owner))
  or acceptanceLeaseProblem(ARGV[3]) or publishCommandProblem(ARGV[4]) or idleTtlProblem(ARGV[5])
if bad then return bad end
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[4], acceptanceLease = tonumber(ARGV[3]), idle = tonumber(ARGV[5]), now = nowMs(),
}
if owner ~= '' then leaveQueue(fair, waiterEntry(owner, waiterId)) end
local handed = grantedTo(fair.lock)
if not handed then return 0 end
local handedOwner, handedWaiter = entryParts(handed)
if handedWaiter ~= waiterId or (owner ~= '' and handedOwner ~= owner) then return 0 end
-- Accepted already (count 1 or more): a hold, ended only by its release.
if redis.call('hget', fair.lock, handedOwner) ~= '0' then return 0 end
redis.call('del', fair.lock)
handToNextWaiter(fair)
return 1
