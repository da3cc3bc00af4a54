--!include semaphore-holds.lua
-- The waiting registry of one semaphore: a sorted set, member '<permits>:<client id>' (the waiters of
-- one process that each want that many permits: a group), score = the time it registered (µs, see
-- waiting-registration.lua). A group listens on '<channel prefix>:<member>'. Keyed by the permits
-- wanted, so that permits coming free wake a group that can take them, never one that wants more
-- than are free while a smaller one waits behind it.

-- Wakes the longest-registered group that wants at most `available` permits and still listens. A
-- group nobody listens for (its process died, or its waiters left and it unsubscribed) could never
-- take them: it is dropped and the next one is tried. The woken group keeps its place until granted.
-- Groups that want more wait on: they are woken when enough are free. Returns the member woken, or
-- false when no group that fits listens (the rest re-check later).
local function wakeGroupThatFits(waitingKey, channelPrefix, publish, available)
  if available <= 0 then return false end
  local dropped = 0
  for _, member in ipairs(redis.call('zrange', waitingKey, 0, -1)) do
    if permitsOf(member) <= available then
      if redis.call(publish, channelPrefix .. ':' .. member, 'free') > 0 then return member end
      redis.call('zrem', waitingKey, member)
      dropped = dropped + 1
      if dropped == 16 then return false end
    end
  end
  return false
end

-- A group's member: the permits each of its waiters wants, and its process's client id.
local function waitingGroup(permits, client)
  return permits .. ':' .. client
end
