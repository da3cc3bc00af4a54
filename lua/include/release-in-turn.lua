-- A release that rides on its process's next attempt (lock-5.lua): inside a turn (see
-- lib/engine/process-turns.ts) the releasing process asks for the lock again at once, so its last
-- release is sent with that attempt instead of on its own. Nobody is woken: the turn goes on.
--!include hold-ids.lua
--!include release-hold.lua

-- Releases hold `holdId` of the lock hash `lockKey`, as unlock-6.lua does with 'keep', but silently:
-- the caller learns nothing of it (it already told its own caller the lock was released). A hold
-- that ended already (a repeat) or is not there changes nothing.
local function releaseInTurn(lockKey, grants, holdId, epoch)
  releaseHold(lockKey, grants, holdId, nil, epoch)
end
