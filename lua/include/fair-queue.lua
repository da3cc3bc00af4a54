--!include server-time.lua
--!include publish-command.lua
-- The fair lock's queue: waiter ids in FIFO order (a list) and their deadlines (a zset, Redis server
-- time in ms). A waiter refreshes its deadline while it waits; one whose deadline passed is dead.
-- `fair` holds the keys and settings of one call: lock, queue, deadlines, fence, channel (prefix),
-- publish, acceptanceLease, now.

-- The BADARG reply for an acceptance lease the fair scripts refuse, or nil.
local function acceptanceLeaseProblem(acceptanceArg)
  local acceptance = tonumber(acceptanceArg)
  if not acceptance or acceptance < 1 or acceptance > 2147483647 or acceptance % 1 ~= 0 then
    return redis.error_reply('BADARG acceptance lease must be whole ms in 1..2147483647, got ' .. tostring(acceptanceArg))
  end
  return nil
end

-- The BADARG reply for a lease or an acceptance lease both fair scripts refuse, or nil.
local function fairArgumentProblem(leaseArg, acceptanceArg)
  local lease = tonumber(leaseArg)
  if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
    return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(leaseArg))
  end
  return acceptanceLeaseProblem(acceptanceArg)
end

-- Drops the dead waiters at the head of the queue.
local function dropDeadHeads(fair)
  while true do
    local head = redis.call('lindex', fair.queue, 0)
    if not head then return end
    local deadline = tonumber(redis.call('zscore', fair.deadlines, head))
    if deadline and deadline > fair.now then return end
    redis.call('lpop', fair.queue)
    redis.call('zrem', fair.deadlines, head)
  end
end

-- Takes the head waiter out of the queue.
local function dequeueHead(fair, head)
  redis.call('lpop', fair.queue)
  redis.call('zrem', fair.deadlines, head)
end

-- Offers the free lock to `waiter` (out of the queue): a new fencing token, told on the channel of its
-- process ('<waiter>|<token>'), held with count 0 until it accepts or the acceptance lease runs out.
-- False when nobody listens for it (its process died or is reconnecting): it could never take the lock.
local function offerTo(fair, waiter)
  local token = redis.call('incr', fair.fence)
  local channel = fair.channel .. ':' .. string.match(waiter, '^[^:]*')
  if redis.call(fair.publish, channel, waiter .. '|' .. token) == 0 then return false end
  redis.call('hset', fair.lock, waiter, 0)
  redis.call('pexpire', fair.lock, fair.acceptanceLease)
  return true
end

-- Hands the free lock to the first live waiter that hears it, if any.
local function handToNextWaiter(fair)
  while true do
    dropDeadHeads(fair)
    local head = redis.call('lindex', fair.queue, 0)
    if not head then return end
    dequeueHead(fair, head)
    if offerTo(fair, head) then return end
  end
end
