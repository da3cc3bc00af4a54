-- Releasing one hold of a reentrant lock by its id (see hold-ids.lua).
--!include hold-ids.lua

-- What releaseHold did (numbers, not reply words: the script that calls it says what to reply).
local HOLD_RELEASED, HOLD_DECREMENTED, HOLD_ENDED, HOLD_MISSING = 1, 2, 3, 4

-- Ends hold `holdId` in the lock hash `lockKey`. Returns what the caller's release did:
--   HOLD_RELEASED     its owner's last hold: the owner's field is gone (the caller hands the lock over)
--   HOLD_DECREMENTED  other holds of its owner remain; the lease is made at least `lease` ms (if given)
--   HOLD_ENDED        nothing changed: the hold had ended already; the second value is how (see hold-ids.lua)
--   HOLD_MISSING      nothing changed: no hold has that id (never taken, cancelled, or forgotten)
-- A live record whose owner no longer holds the lock (it expired, or was forced), or whose epoch is not
-- `epoch` (the fencing counter now, if given: see hold-ids.lua), is ended as 'x'. `how`: nil for a lock
-- whose holds may have several owners at once (a read lock); 'exclusive' for a lock of one owner at a
-- time, whose last hold leaves no live hold behind (see endLastHold); 'whole' the same, and the
-- owner's last hold deletes the lock key itself instead of the owner's field (a lock whose other
-- fields go with its last hold, as the fair lock's record of the wait it was granted to).
local function releaseHold(lockKey, grants, holdId, lease, epoch, how)
  local kind, _, owner = readHold(grants, holdId, epoch)
  if kind == nil then return HOLD_MISSING end
  if kind == 'x' and redis.call('hget', grants, holdId) ~= 'x' then endHold(grants, holdId, 'x') end
  if kind ~= 'g' and kind ~= 'e' then return HOLD_ENDED, kind end
  -- pcall: a string here is a simple lock's hold (another owner), not an error
  local count = redis.pcall('hget', lockKey, owner)
  count = type(count) == 'string' and tonumber(count) or nil
  if not count then
    endHold(grants, holdId, 'x')
    return HOLD_ENDED, 'x'
  end
  if count > 1 then
    redis.call('hincrby', lockKey, owner, -1)
    if lease then
      keepAtLeast(lockKey, lease)
      -- The holds left are recorded there: their records must last as long as the lease just made.
      keepGrants(grants, lease)
    end
    endHold(grants, holdId, 'd')
    return HOLD_DECREMENTED
  end
  if how == 'whole' then redis.call('del', lockKey) else redis.call('hdel', lockKey, owner) end
  if how then endLastHold(grants, holdId) else endHold(grants, holdId, 'r') end
  return HOLD_RELEASED
end

-- After releaseHold decremented a hold of `lockKey` (its lease made `lease` ms from now): the fencing
-- counter `fence`, the epoch of the holds left (see hold-ids.lua), must live as long, or they would read
-- as ran out while Redis keeps them, and their release would leave them behind.
local function keepEpochWithLease(lockKey, fence)
  local left = redis.call('pttl', lockKey)
  if left > 0 then keepAtLeast(fence, left) end
end
