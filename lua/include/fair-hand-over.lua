-- The fair lock's hand-over (see fair-queue.lua for the queue and the message): what a release that
-- hands the lock on needs, apart so that such a release defines no more than it uses (each function a
-- script defines costs Redis something at every call). Expects the `fair` table of fair-queue.lua.
--!include fair-args.lua
--!include server-time.lua
--!include exclusive-token.lua
--!include grant-record.lua
--!include release-record.lua

-- The owner and the waiter id of a queue entry; nil for an entry of no known shape.
local function entryParts(entry)
  local cut = string.find(entry, '\0', 1, true)
  if not cut then return nil end
  return string.sub(entry, 1, cut - 1), string.sub(entry, cut + 1)
end

-- Redis server time in ms for this call: read once, when first needed (an uncontended call never does),
-- with the µs a hand-over's fencing token starts from (see offerTo).
local function fairNow(fair)
  local now = fair.now
  if not now then
    now, fair.nowUs = serverNow()
    fair.now = now
  end
  return now
end

-- Drops the dead waiters at the head of the queue. Returns the live head left, or nil when the queue is empty.
local function dropDeadHeads(fair)
  while true do
    local head = redis.call('lindex', fair.queue, 0)
    if not head then return nil end
    local deadline = tonumber(redis.call('zscore', fair.deadlines, head))
    if deadline and deadline > fairNow(fair) then return head end
    redis.call('lpop', fair.queue)
    redis.call('zrem', fair.deadlines, head)
    if fair.holds then redis.call('hdel', fair.holds, head) end
  end
end

-- Takes `entry` out of the queue, wherever it is in the list.
local function takeOut(fair, entry)
  redis.call('lrem', fair.queue, 1, entry)
  redis.call('zrem', fair.deadlines, entry)
  if fair.holds then redis.call('hdel', fair.holds, entry) end
end

-- The queued wait `entry` registers `holdId`, its latest attempt's own id, for a grant in the message.
local function registerHold(fair, entry, holdId)
  if fair.holds then redis.call('hset', fair.holds, entry, holdId) end
end

-- Hands the free lock to the wait of `entry` (out of the queue), with a new fencing token. With the
-- hold id `holdId` that wait registered and no record under it yet, the hold is recorded under that id
-- (owner count 1, lease the acceptance lease) and the message is the grant: '<waiter id>|<token>:<Redis
-- server ms now>:<hold id>'. Otherwise the lock is offered: told as '<waiter id>|<token>' and held with its
-- owner's count 0 until that wait accepts it (fair-accept-3.lua). Either way the acceptance lease bounds
-- what a wait that never takes it costs. False when nobody listens for it (its process died or is
-- reconnecting: it could never take the lock), or the entry is of no known shape.
local function offerTo(fair, entry, holdId)
  local owner, waiterId = entryParts(entry)
  local client = waiterId and string.match(waiterId, '^(.*):[^:]+$')
  if not client or owner == '' then return false end
  -- The lock is free: no live hold is numbered by the counter but the one this hand-over makes. The
  -- clock was read for the queue's deadlines (a given `now` came without its µs: read again).
  fairNow(fair)
  local token = nextExclusiveToken(fair.fence, fair.acceptanceLease + fair.idle, fair.nowUs)
  local grant = holdId and fair.grants and not readHold(fair.grants, holdId)
  local message = waiterId .. '|' .. tokenText(token)
  if grant then message = message .. ':' .. tokenText(fairNow(fair)) .. ':' .. holdId end
  if redis.call(fair.publish, fair.channel .. ':' .. client, message) == 0 then return false end
  if grant then
    redis.call('hset', fair.lock, owner, 1, GRANTED_TO, entry, HANDED_HOLD, holdId)
    recordFirstGrant(fair.grants, holdId, token, owner, fair.acceptanceLease)
  else
    redis.call('hset', fair.lock, owner, 0, GRANTED_TO, entry)
  end
  redis.call('pexpire', fair.lock, fair.acceptanceLease)
  return true
end

-- Hands the free lock to the longest-waiting live wait that hears it (see offerTo), dropping the dead
-- (past their deadline) and the malformed it passes. One nobody hears now (its subscriber is
-- reconnecting, or its process died) keeps its place for one acceptance lease at most: its process
-- retries once its subscriber is back, which refreshes the place, and a dead process's waits are not
-- told at every hand-over until their deadlines. Stops at `self`, the calling wait's own entry (nil:
-- none): it is the next in line. Returns true when handed to a wait, `self` (the entry) when it comes
-- first, false when nobody in the queue (before `self`) hears it.
local function handToNextWaiter(fair, self)
  -- The first entry alone, then a few at a time: a hand-over most often goes to the first entry.
  -- `kept` entries stay ahead.
  local kept, deaf, span = 0, {}, 0
  while true do
    local batch = redis.call('lrange', fair.queue, kept, kept + span)
    for _, entry in ipairs(batch) do
      if entry == self then return self end
      local deadline = tonumber(redis.call('zscore', fair.deadlines, entry))
      local owner, waiterId = entryParts(entry)
      local client = waiterId and string.match(waiterId, '^(.*):[^:]+$')
      if not deadline or deadline <= fairNow(fair) or not client or owner == '' then
        takeOut(fair, entry)
      elseif not deaf[client] and offerTo(fair, entry, fair.holds and redis.call('hget', fair.holds, entry) or nil) then
        takeOut(fair, entry)
        return true
      else
        -- Nobody hears it (nor, then, any other wait of its client): passed by, for an acceptance lease.
        deaf[client] = true
        local keptUntil = fairNow(fair) + fair.acceptanceLease
        if deadline > keptUntil then redis.call('zadd', fair.deadlines, 'lt', keptUntil, entry) end
        kept = kept + 1
      end
    end
    if #batch <= span then return false end
    span = 15
  end
end
