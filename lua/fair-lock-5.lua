#!lua
-- Fair lock: acquire, accept a hand-off, re-enter, or queue up (FIFO).
-- KEYS[1]  lock hash            owner -> hold count; count 0 = handed over, not yet accepted; and the
--                               wait it was granted or handed to (see fair-queue.lua)
-- KEYS[2]  waiter queue         list of wait entries '<owner id>\0<waiter id>', head first
-- KEYS[3]  waiter deadlines     zset entry -> Redis server time (ms) after which the waiter counts as dead
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       a waiter is told on <KEYS[5]>:<its client id>, message '<waiter id>|<fencing
--                               token>' when the lock is handed to it
-- ARGV[1]  lease in ms
-- ARGV[2]  owner id             any text without NUL; never parsed
-- ARGV[3]  stale-waiter timeout in ms (waiters refresh their deadline more often than this)
-- ARGV[4]  acceptance lease in ms (a lock handed to a waiter lives this long until accepted)
-- ARGV[5]  publish command      'publish' or 'spublish'
-- ARGV[6]  holds before         the holds the caller knows the owner has ('' = not said): for a re-entry,
--                               one more in the hash means this attempt already landed (see
--                               repeated-attempt.lua); a first hold is told by the waiter id instead
-- ARGV[7]  waiter id            '<client id>:<nonce>', made by the client for this one lock() or tryLock()
--                               call: its place in the queue, and what its grant is recorded under
-- ARGV[8]  mode                 'wait': the caller waits if refused, so it queues; 'once': a single
--                               attempt, which never queues
-- Returns  {'granted', token}    acquired (or accepted the hand-off made to this wait); token = its fencing token
--          {'reentered', token}  re-entered (the owner holds it, whichever call asks); the wait leaves the queue
--                                (a repeat that already landed: the same reply as its first run; nothing changes)
--          {'refused', pttl}     queued (or still queued; 'once': not queued): wait for a message or pttl
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include fair-queue.lua
--!include repeated-attempt.lua
local lease, owner, staleAfter, waiterId, mode = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[7], ARGV[8]
local bad = fairArgumentProblem(ARGV[1], ARGV[4]) or publishCommandProblem(ARGV[5]) or ownerProblem(owner)
  or waiterIdProblem(waiterId)
if bad then return bad end
local heldBefore, badHeld = heldBeforeArgument(ARGV[6])
if badHeld then return badHeld end
if not staleAfter or staleAfter < 1 or staleAfter > 2147483647 or staleAfter % 1 ~= 0 then
  return redis.error_reply('BADARG stale-waiter timeout must be whole ms in 1..2147483647, got ' .. tostring(ARGV[3]))
end
if mode ~= 'wait' and mode ~= 'once' then
  return redis.error_reply('BADARG mode must be wait or once, got ' .. tostring(mode))
end
local entry = waiterEntry(owner, waiterId)
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[5], acceptanceLease = tonumber(ARGV[4]), now = nowMs(),
}
dropDeadHeads(fair)

-- pcall: a string here is a simple lock's hold (another owner): queue up behind it
local held = redis.pcall('hget', fair.lock, owner)
if type(held) ~= 'string' then held = nil end
local ours = held and grantedTo(fair.lock) == entry
if held == '0' then
  -- Handed to a wait of this owner: that wait takes it over (its message may be late or lost); any
  -- other wait of the owner keeps its own place behind.
  if ours then
    redis.call('hset', fair.lock, owner, 1)
    redis.call('pexpire', fair.lock, lease)
    return {'granted', tonumber(redis.call('get', fair.fence))}
  end
elseif held then
  -- The owner holds it: as in Redisson, the same owner re-enters, whichever call asks; this wait is over.
  leaveQueue(fair, entry)
  -- This call's own attempt landed before (its reply was lost): the same reply, nothing counted again.
  -- A hold the caller knew nothing of is not taken for its own: another process may share the owner.
  if ours or (heldBefore and heldBefore > 0 and alreadyLanded(held, heldBefore)) then
    extendLease(fair.lock, lease)
    return {ours and 'granted' or 'reentered', tonumber(redis.call('get', fair.fence))}
  end
  redis.call('hincrby', fair.lock, owner, 1)
  if redis.call('pttl', fair.lock) < lease then redis.call('pexpire', fair.lock, lease) end
  return {'reentered', tonumber(redis.call('get', fair.fence))}
else
  while redis.call('exists', fair.lock) == 0 do
    local head = redis.call('lindex', fair.queue, 0)
    if (not head) or head == entry then
      if head then dequeueHead(fair, head) end
      redis.call('hset', fair.lock, owner, 1, GRANTED_TO, entry)
      redis.call('pexpire', fair.lock, lease)
      return {'granted', redis.call('incr', fair.fence)}
    end
    -- Free, but a live waiter is ahead of us (its holder expired without a release): offer it the
    -- lock, or, if nobody listens for it, drop it and look again.
    dequeueHead(fair, head)
    offerTo(fair, head)
  end
end

if mode == 'wait' then
  if not redis.call('zscore', fair.deadlines, entry) then
    redis.call('rpush', fair.queue, entry)
  end
  redis.call('zadd', fair.deadlines, fair.now + staleAfter, entry)
end
return {'refused', redis.call('pttl', fair.lock)}
