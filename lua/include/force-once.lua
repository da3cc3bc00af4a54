-- A force unlock runs once per call. An application's ioredis client sends a command again on its new
-- connection when the old one died before the reply came; by then the unlock has woken the waiters and
-- one of them may hold the lock, which a second run would delete under it. Each call carries an id of
-- its own; the first run records its outcome under that id in a small hash (kept FORCE_MEMORY_MS after
-- the latest force), and a repeat finds it and replies the same without touching the lock.
local FORCE_MEMORY_MS = 600000

-- The call id, or nil and the BADARG reply to return before any write.
local function forceCallArgument(callId)
  if callId == nil or callId == '' then return nil, redis.error_reply('BADARG force call id is empty') end
  return callId
end

-- The outcome an earlier run of this call recorded, or nil when this is its first run.
local function earlierForce(marker, callId)
  local outcome = redis.call('hget', marker, callId)
  if outcome then return tonumber(outcome) end
  return nil
end

local function rememberForce(marker, callId, outcome)
  redis.call('hset', marker, callId, outcome)
  redis.call('pexpire', marker, FORCE_MEMORY_MS)
  return outcome
end
