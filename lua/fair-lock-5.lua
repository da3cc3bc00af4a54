#!lua
-- Fair lock: acquire, accept a hand-off, re-enter, or queue up (FIFO).
-- KEYS[1]  lock hash            owner -> hold count; count 0 = handed over, not yet accepted
-- KEYS[2]  waiter queue         list of owner ids, head first
-- KEYS[3]  waiter deadlines     zset owner -> Redis server time (ms) after which the waiter counts as dead
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       a waiter is told on <KEYS[5]>:<first segment of its owner id>,
--                               message '<owner id>|<fencing token>' when the lock is handed to it
-- ARGV[1]  lease in ms
-- ARGV[2]  owner id
-- ARGV[3]  stale-waiter timeout in ms (waiters refresh their deadline more often than this)
-- ARGV[4]  acceptance lease in ms (a lock handed to a waiter lives this long until accepted)
-- ARGV[5]  publish command      'publish' or 'spublish'
-- ARGV[6]  holds before         the holds the caller knows the owner has ('' = not said): one more in
--                               the hash means this attempt already landed (see repeated-attempt.lua)
-- Returns  {'granted', token}    acquired (or accepted a hand-off); token = its fencing token
--          {'reentered', token}  re-entered
--                                (a repeat that already landed: the same reply as its first run; nothing changes)
--          {'refused', pttl}     queued (or still queued): wait for a message or pttl
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include fair-queue.lua
--!include repeated-attempt.lua
local lease, owner, staleAfter = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local bad = fairArgumentProblem(ARGV[1], ARGV[4]) or publishCommandProblem(ARGV[5])
if bad then return bad end
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local heldBefore, badHeld = heldBeforeArgument(ARGV[6])
if badHeld then return badHeld end
if not staleAfter or staleAfter < 1 or staleAfter > 2147483647 or staleAfter % 1 ~= 0 then
  return redis.error_reply('BADARG stale-waiter timeout must be whole ms in 1..2147483647, got ' .. tostring(ARGV[3]))
end
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[5], acceptanceLease = tonumber(ARGV[4]), now = nowMs(),
}
dropDeadHeads(fair)

-- pcall: a string here is a simple lock's hold (another owner): queue up behind it
local held = redis.pcall('hget', fair.lock, owner)
if type(held) ~= 'string' then held = nil end
if held == '0' then
  redis.call('hset', fair.lock, owner, 1)
  redis.call('pexpire', fair.lock, lease)
  return {'granted', tonumber(redis.call('get', fair.fence))}
end
if held and alreadyLanded(held, heldBefore) then
  extendLease(fair.lock, lease)
  return {heldBefore == 0 and 'granted' or 'reentered', tonumber(redis.call('get', fair.fence))}
end
if held then
  redis.call('hincrby', fair.lock, owner, 1)
  if redis.call('pttl', fair.lock) < lease then redis.call('pexpire', fair.lock, lease) end
  return {'reentered', tonumber(redis.call('get', fair.fence))}
end

while redis.call('exists', fair.lock) == 0 do
  local head = redis.call('lindex', fair.queue, 0)
  if (not head) or head == owner then
    if head then dequeueHead(fair, head) end
    redis.call('hset', fair.lock, owner, 1)
    redis.call('pexpire', fair.lock, lease)
    return {'granted', redis.call('incr', fair.fence)}
  end
  -- Free, but a live waiter is ahead of us (its holder expired without a release): offer it the
  -- lock, or, if nobody listens for it, drop it and look again.
  dequeueHead(fair, head)
  offerTo(fair, head)
end

if not redis.call('zscore', fair.deadlines, owner) then
  redis.call('rpush', fair.queue, owner)
end
redis.call('zadd', fair.deadlines, fair.now + staleAfter, owner)
return {'refused', redis.call('pttl', fair.lock)}
