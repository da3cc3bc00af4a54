#!lua flags=allow-oom
-- Reentrant lock: release one hold, named by its id (see hold-ids.lua). Safe to send again after an
-- unknown outcome (a connection that dropped before the reply), from any process, at any time: a
-- repeat finds the hold ended and replies what the first copy did, and no copy can touch another hold.
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel       <prefix>:{<name>}:unlock (same hash tag, so SPUBLISH stays on the slot);
--                               a waiting process listens on <KEYS[2]>:<its client id>
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting (see lock-5.lua)
-- KEYS[4]  hand-over            <prefix>:{<name>}:next (see hand-over.lua)
-- KEYS[5]  hold ids             <prefix>:{<name>}:grants (see hold-ids.lua)
-- KEYS[6]  fencing counter      <prefix>:{<name>}:fence: the epoch of the holds that count (see hold-ids.lua); kept
--                               as long as the hold a decrement leaves
-- ARGV[1]  owner id             the hold's owner (checked against the hold's record)
-- ARGV[2]  hold id              the hold to release; with ARGV[8] 'any', this call's own id instead
-- ARGV[3]  lease in ms, re-applied while holds remain (whole number in 1..31536000000)
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  message              sent to the one waiting process woken (see wake-one-process.lua)
-- ARGV[6]  'pass' to hand the lock over to the longest-waiting process; 'keep' while the releasing
--          process's turn lasts: the free lock stays reserved for that process until the turn ends
--          (ARGV[9]), and the next process in line is told to try then (see hand-over.lua keepTurn)
-- ARGV[7]  client id of the releasing process (needed with 'keep': its own registration is not a rival)
-- ARGV[8]  'one' the hold ARGV[2]; 'any' any one hold of the owner (unlock by owner of a hold this
--          client did not record): the call's id ARGV[2] is then recorded as the hold it ended
-- ARGV[9]  turn ms              with 'keep': how long the releasing process's turn may still last (1..3600000)
-- Returns  'released'     last hold: key deleted; handed over to a waiting process if any
--          'kept'         last hold, with 'keep' while other processes than the caller's wait: reserved
--                         for the caller's turn
--          'decremented'  one hold released, others of the owner remain
--          'not-locked'   not locked at all (expired, forced, or never taken)
--          'not-owner'    locked, but the hold is not there (ended without this release); nothing changed
--          (a repeat replies 'released' or 'decremented' as its first copy did)
--          error BADARG before any write when an argument is unusable
--!include hand-over-args.lua
--!include release-args.lua
--!include release-record.lua
local owner, publish, handOverMode, client = ARGV[1], ARGV[4], ARGV[6], ARGV[7]
local call, bad = releaseCallArguments(owner, ARGV[2], ARGV[3], publish, ARGV[8])
if not call then return bad end
local holdId, lease, which = call.holdId, call.lease, call.which
local turnMs, badHandOver = handOverArguments(handOverMode, client, ARGV[9])
if badHandOver then return badHandOver end

local epoch = epochOf(KEYS[6])

-- The uncontended case first, before the steps of any other are defined (each step a script defines
-- costs Redis something at every call): the call ends its own hold, live and its owner's only one, and
-- nobody else holds the lock, waits for it or has it reserved: nothing to hand over, no turn to keep or
-- end. One EXISTS for the lock, the waiting registry and the hand-over: each is counted as often as it
-- is named, so the count is odd exactly when the lock exists (and 0 when none does).
local existing
if which == 'one' then
  local kind, _, holder = readHold(KEYS[5], holdId, epoch)
  -- pcall: a string here is a simple lock's hold (another owner), not an error
  if (kind == 'g' or kind == 'e') and holder == owner and redis.pcall('hget', KEYS[1], owner) == '1' then
    redis.call('hdel', KEYS[1], owner)
    endLastHold(KEYS[5], holdId)
    existing = redis.call('exists', KEYS[1], KEYS[3], KEYS[3], KEYS[4], KEYS[4])
    if existing == 0 then return 'released' end
  end
end
-- Anything else (a repeat, an unlock by owner, a hold with others of its owner left, one that ended),
-- or a release that leaves others waiting.
--!include release-call.lua
if not existing then
  -- pcall: as above
  local function ownerHolds() return redis.pcall('hexists', KEYS[1], owner) == 1 end
  local function locked() return redis.call('exists', KEYS[1]) == 1 end
  local target, early = releaseTarget(KEYS[5], holdId, owner, which, epoch, ownerHolds, locked)
  if not target then return early end
  local did, outcome = releaseHold(KEYS[1], KEYS[5], target, lease, epoch, 'exclusive')
  local settled = settleReleaseCall(KEYS[5], holdId, target, which, did, outcome, ownerHolds, locked)
  if settled then return settled end
  if did == HOLD_DECREMENTED then
    keepEpochWithLease(KEYS[1], KEYS[6])
    return 'decremented'
  end
  existing = redis.call('exists', KEYS[1], KEYS[3], KEYS[3], KEYS[4], KEYS[4])
  if existing == 0 then return 'released' end
end
if existing % 2 == 1 then return 'decremented' end
-- The hand-over's steps, defined only past the uncontended case (as above).
--!include hand-over.lua
return afterRelease(handOverMode, KEYS[3], KEYS[2], KEYS[4], publish, client, turnMs, ARGV[5] or '')
