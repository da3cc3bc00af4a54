--!include fair-hand-over.lua
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

-- Takes `entry` out of the queue, wherever it is (an entry is in the list exactly when it has a deadline).
local function leaveQueue(fair, entry)
  if redis.call('zrem', fair.deadlines, entry) == 1 then
    redis.call('lrem', fair.queue, 1, entry)
    if fair.holds then redis.call('hdel', fair.holds, entry) end
  end
end

-- The id of the hold the lock was handed over under (a grant in the message), or nil.
local function handedHold(lockKey)
  -- pcall: a string here is a simple lock's hold
  local id = redis.pcall('hget', lockKey, HANDED_HOLD)
  return type(id) == 'string' and id or nil
end
