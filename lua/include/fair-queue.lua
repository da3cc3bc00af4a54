--!include fair-args.lua
--!include server-time.lua
--!include fencing.lua
--!include hold-ids.lua
-- The fair lock's queue: one entry per wait, in FIFO order (a list) with its deadline (a zset, Redis
-- server time in ms). A waiter refreshes its deadline while it waits; one whose deadline passed is dead.
-- An entry is '<owner id>\0<waiter id>': the owner the wait is for (owner ids hold no NUL, so the
-- first NUL ends it; the owner is never parsed further) and the waiter id its client made for this one
-- wait, '<client id>:<nonce>' (the nonce holds no ':'). A waiter is told on '<channel>:<client id>',
-- its client's own channel, whatever its owner's text; the message names its waiter id.
-- A single attempt (tryLock without waiting) has a waiter id too, and never queues.
-- The lock hash keeps, under GRANTED_TO (a field no owner id can be: it starts with NUL), the entry of
-- the wait the lock was granted or handed to: a hand-off (its owner's count 0) can only be taken over
-- or accepted by that wait. It goes with the lock hash. A hand-off is no hold: the hold begins when its
-- wait accepts it, recorded then under that attempt's own id like every other hold (see hold-ids.lua).
-- Each queued wait also registers the hold id of its latest attempt (the waiter-holds hash, entry ->
-- hold id): the releasing script records the hold under that id itself and the message alone tells
-- the wait it holds (a grant in the message, '<waiter id>|<token>:<server ms>:<hold id>'), the lock
-- living the acceptance lease until the holder renews it; HANDED_HOLD names that hold in the lock hash
-- (it goes with the lock hash too). A wait with no usable id (none registered, or one a record exists
-- for: an attempt cancelled after a lost reply) is offered the lock instead ('<waiter id>|<token>',
-- its owner's count 0) and accepts it (fair-accept-3.lua).
-- `fair` holds the keys and settings of one call: lock, queue, deadlines, fence, channel (prefix),
-- publish, acceptanceLease, idle (how long the fencing counter outlives a lease), grants and holds
-- (the hold ids and waiter-holds hashes; without them every hand-over is an offer), and now (Redis
-- server time in ms, read by fairNow when first needed, or given).

-- The owner and the waiter id of a queue entry; nil for an entry of no known shape.
local function entryParts(entry)
  local cut = string.find(entry, '\0', 1, true)
  if not cut then return nil end
  return string.sub(entry, 1, cut - 1), string.sub(entry, cut + 1)
end

-- Whether `owner` holds the lock (a count of 1 or more: a hand-off to one of its waits, count 0, is no hold).
local function ownerHolds(lockKey, owner)
  -- pcall: a string here is a simple lock's hold
  local count = redis.pcall('hget', lockKey, owner)
  return type(count) == 'string' and count ~= '0'
end

-- The entry of the wait the lock was granted or handed to (a hand-off: accepted or not yet), or nil.
local function grantedTo(lockKey)
  -- pcall: a string here is a simple lock's hold
  local entry = redis.pcall('hget', lockKey, GRANTED_TO)
  return type(entry) == 'string' and entry or nil
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

-- Takes the head waiter out of the queue.
local function dequeueHead(fair, head)
  redis.call('lpop', fair.queue)
  redis.call('zrem', fair.deadlines, head)
  if fair.holds then redis.call('hdel', fair.holds, head) end
end

-- Takes `entry` out of the queue, wherever it is (an entry is in the list exactly when it has a deadline).
local function leaveQueue(fair, entry)
  if redis.call('zrem', fair.deadlines, entry) == 1 then
    redis.call('lrem', fair.queue, 1, entry)
    if fair.holds then redis.call('hdel', fair.holds, entry) end
  end
end

-- The queued wait `entry` registers `holdId`, its latest attempt's own id, for a grant in the message.
local function registerHold(fair, entry, holdId)
  if fair.holds then redis.call('hset', fair.holds, entry, holdId) end
end

-- The id of the hold the lock was handed over under (a grant in the message), or nil.
local function handedHold(lockKey)
  -- pcall: a string here is a simple lock's hold
  local id = redis.pcall('hget', lockKey, HANDED_HOLD)
  return type(id) == 'string' and id or nil
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
    recordHold(fair.grants, holdId, 'g', token, owner, fair.acceptanceLease, token, true)
  else
    redis.call('hset', fair.lock, owner, 0, GRANTED_TO, entry)
  end
  redis.call('pexpire', fair.lock, fair.acceptanceLease)
  return true
end

-- Takes the live `head` out of the queue and hands it the free lock (see offerTo). False when nobody
-- listens for it.
local function handToHead(fair, head)
  local holdId = fair.holds and redis.call('hget', fair.holds, head) or nil
  dequeueHead(fair, head)
  return offerTo(fair, head, holdId)
end

-- Hands the free lock to the first live waiter that hears it, if any.
local function handToNextWaiter(fair)
  while true do
    local head = dropDeadHeads(fair)
    if not head then return end
    if handToHead(fair, head) then return end
  end
end
