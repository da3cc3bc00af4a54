-- One release call of a lock whose holds are recorded by id (see hold-ids.lua), as unlock-6.lua
-- makes it: 'one' ends the hold the call names; 'any' (an unlock by owner of a hold the caller did not
-- record) ends one live hold of the owner, and the call's own id records what it did. Either way a
-- repeat of the call (re-sent after a lost reply, from any process) replies what its first copy did and
-- changes nothing. The script around it says what 'held' means for its lock: `ownerHolds()`, whether the
-- releasing owner still has a hold; `locked()`, whether anyone has one.
--!include release-args.lua
--!include release-hold.lua

-- What a release that ends no hold replies: someone else holds the lock, or nobody does.
local function notHeldReply(locked)
  return locked() and 'not-owner' or 'not-locked'
end

-- What a release of a hold that had ended replies: a repeat, what its first copy did; a hold another
-- call of the same owner released, what is left of the owner's holds; else not held.
local function endedReleaseReply(kind, ownerHolds, locked)
  if kind == 'r' then return 'released' end
  if kind == 'd' then return 'decremented' end
  if kind == 'o' then return ownerHolds() and 'decremented' or 'released' end
  return notHeldReply(locked)
end

-- The hold call `callId` of `owner` ends ('one': the hold `callId` itself, if it is the owner's; 'any':
-- a live hold of the owner). `epoch`: the fencing counter now, where records keep theirs (see
-- hold-ids.lua). Returns the hold's id, or nil and the reply when the call ends none.
local function releaseTarget(grants, callId, owner, which, epoch, ownerHolds, locked)
  if which == 'any' then
    local kind = readHold(grants, callId)
    if kind then return nil, endedReleaseReply(kind, ownerHolds, locked) end
    local target = liveHoldOf(grants, owner, epoch)
    if not target then
      -- Recorded, so that a copy sent after the owner took the lock again ends none of its holds.
      endHold(grants, callId, 'x' .. CALL_MARK)
      return nil, notHeldReply(locked)
    end
    return target
  end
  local kind, _, holder = readHold(grants, callId, epoch)
  if (kind == 'g' or kind == 'e') and holder ~= owner then return nil, notHeldReply(locked) end
  return callId
end

-- After releaseHold(…, target, …) returned `did` and `outcome`: an 'any' call records what it did
-- under its own id (and the hold it ended as ended by another call); an unknown id is cancelled, so a
-- late copy of its attempt takes nothing. Returns the reply when nothing was released, else nil (the
-- caller goes on).
local function settleReleaseCall(grants, callId, target, which, did, outcome, ownerHolds, locked)
  if which == 'any' and (did == HOLD_RELEASED or did == HOLD_DECREMENTED) then
    endHold(grants, target, 'o')
    local what = 'd'
    if did == HOLD_RELEASED then what = 'r' end
    endHold(grants, callId, what .. CALL_MARK)
  end
  if did == HOLD_MISSING then
    endHold(grants, callId, 'x')
    return notHeldReply(locked)
  end
  if did == HOLD_ENDED then
    -- An 'any' call whose target had ended ends nothing: recorded so, as above (releaseTarget).
    if which == 'any' then endHold(grants, callId, 'x' .. CALL_MARK) end
    return endedReleaseReply(outcome, ownerHolds, locked)
  end
  return nil
end
