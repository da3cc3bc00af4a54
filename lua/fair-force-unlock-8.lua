#!lua flags=allow-oom
-- Fair lock: delete the lock whoever holds it, and hand it to the next live waiter.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       (see fair-unlock-7.lua)
-- KEYS[6]  force calls          (see force-once.lua)
-- KEYS[7]  hold ids             (see hold-ids.lua): every live hold's record ends with the lock, so
--                               its release finds it gone (and says so); ended records stay (endLiveHolds)
-- KEYS[8]  waiter holds         (see fair-lock-7.lua)
-- ARGV[1]  acceptance lease in ms for the waiter the lock is handed to
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  call id              the same on a repeat of this call, which then changes nothing
-- ARGV[4]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Returns  1 deleted, 0 was not locked (a repeat: what the first run returned);
--          error BADARG before any write when an argument is unusable
--!include fair-queue.lua
--!include force-once.lua
local bad = acceptanceLeaseProblem(ARGV[1]) or publishCommandProblem(ARGV[2]) or idleTtlProblem(ARGV[4])
if bad then return bad end
local callId, badCall = forceCallArgument(ARGV[3])
if badCall then return badCall end
local earlier = earlierForce(KEYS[6], callId)
if earlier then return earlier end
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[2], acceptanceLease = tonumber(ARGV[1]), idle = tonumber(ARGV[4]), now = nowMs(),
  grants = KEYS[7], holds = KEYS[8],
}
local deleted = redis.call('del', fair.lock) == 1
if deleted then endLiveHolds(KEYS[7]) end
-- Locked or not (one that expired under its holder left the queue untold), the next waiter gets it.
handToNextWaiter(fair)
return rememberForce(KEYS[6], callId, deleted and 1 or 0)
