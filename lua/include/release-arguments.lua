--!include publish-command.lua

-- A hold count the client sent (`what` names it in the error): a number, nil when unknown ('' or
-- absent), or nil and the BADARG reply to return before any write.
local function holdCountArgument(value, what)
  if value == nil or value == '' then return nil end
  local holds = tonumber(value)
  if not holds or holds < 1 or holds % 1 ~= 0 then
    return nil, redis.error_reply('BADARG ' .. what .. ' must be a whole number >= 1, got ' .. tostring(value))
  end
  return holds
end

-- The arguments every hold-count release takes (reentrant lock, both sides of a read-write lock).
-- Returns lease (ms) and expected hold count (nil: unknown), or nil and the BADARG reply to return
-- before any write.
local function releaseArguments(owner, lease, publish, expected)
  if not owner or owner == '' then return nil, nil, redis.error_reply('BADARG owner id is empty') end
  local ms = tonumber(lease)
  if not ms or ms < 1 or ms > 31536000000 or ms % 1 ~= 0 then
    return nil, nil, redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(lease))
  end
  local badPublish = publishCommandProblem(publish)
  if badPublish then return nil, nil, badPublish end
  local holds, badHolds = holdCountArgument(expected, 'expected hold count')
  if badHolds then return nil, nil, badHolds end
  return ms, holds
end

-- The reply that ends a release before any write, or nil to go on. `count`: the releasing owner's hold
-- count (nil: it holds none); `locked()`: whether anyone holds the lock at all; `expected`: the holds
-- the client counted before this release (nil: unknown). With the count it expects, a repeat of a
-- release that already landed (sent again after an unknown outcome) changes nothing.
local function releaseShortcut(count, locked, expected)
  if not count then return locked() and 'not-owner' or 'not-locked' end
  if expected and count > 0 and count == expected - 1 then return 'decremented' end
  return nil
end
