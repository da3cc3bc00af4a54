-- A release that rides on its process's next attempt (lock-4.lua): inside a turn (see
-- lib/engine/process-turns.ts) the releasing process asks for the lock again at once, so its last
-- release is sent with that attempt instead of on its own. Nobody is woken: the turn goes on.
--!include release-arguments.lua

-- The prior owner and its expected hold count (nil: none to release), or the BADARG reply to return
-- before any write.
local function priorRelease(owner, expected)
  if owner == nil or expected == nil then return nil, nil, redis.error_reply('BADARG prior release is missing') end
  if owner == '' then return nil end
  local holds, badHolds = holdCountArgument(expected, 'prior hold count')
  if badHolds then return nil, nil, badHolds end
  return owner, holds
end

-- Releases one hold of `owner` in the lock hash `lockKey`, as unlock-4.lua does with 'keep', but
-- silently: the caller learns nothing of it (it already told its own caller the lock was released).
local function releaseInTurn(lockKey, owner, expected)
  -- pcall: a string here is a simple lock's hold (another owner), not an error
  local count = redis.pcall('hget', lockKey, owner)
  count = type(count) == 'string' and tonumber(count) or nil
  if releaseShortcut(count, function() return false end, expected) then return end
  if count > 1 then
    redis.call('hincrby', lockKey, owner, -1)
  else
    redis.call('del', lockKey)
  end
end
