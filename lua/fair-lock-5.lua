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
-- Returns  {0, token}  acquired (or accepted a hand-off); token = its fencing token
--          {1, token}  re-entered
--          {2, pttl}   queued (or still queued): wait for a message or pttl
local lockKey, queueKey, deadlineKey, fenceKey, channelPrefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease, owner = tonumber(ARGV[1]), ARGV[2]
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Waiters that stopped refreshing their deadline are dead: drop them from the head of the queue.
while true do
  local head = redis.call('lindex', queueKey, 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', deadlineKey, head))
  if deadline and deadline > now then break end
  redis.call('lpop', queueKey)
  redis.call('zrem', deadlineKey, head)
end

local held = redis.call('hget', lockKey, owner)
if held == '0' then
  redis.call('hset', lockKey, owner, 1)
  redis.call('pexpire', lockKey, lease)
  return {0, tonumber(redis.call('get', fenceKey))}
end
if held then
  redis.call('hincrby', lockKey, owner, 1)
  if redis.call('pttl', lockKey) < lease then redis.call('pexpire', lockKey, lease) end
  return {1, tonumber(redis.call('get', fenceKey))}
end

if redis.call('exists', lockKey) == 0 then
  local head = redis.call('lindex', queueKey, 0)
  if (not head) or head == owner then
    if head then
      redis.call('lpop', queueKey)
      redis.call('zrem', deadlineKey, owner)
    end
    redis.call('hset', lockKey, owner, 1)
    redis.call('pexpire', lockKey, lease)
    return {0, redis.call('incr', fenceKey)}
  end
  -- Free, but a live waiter is ahead of us (its holder expired without a release): hand it over.
  redis.call('lpop', queueKey)
  redis.call('zrem', deadlineKey, head)
  redis.call('hset', lockKey, head, 0)
  redis.call('pexpire', lockKey, tonumber(ARGV[4]))
  local token = redis.call('incr', fenceKey)
  redis.call(ARGV[5], channelPrefix .. ':' .. string.match(head, '^[^:]*'), head .. '|' .. token)
end

if not redis.call('zscore', deadlineKey, owner) then
  redis.call('rpush', queueKey, owner)
end
redis.call('zadd', deadlineKey, now + tonumber(ARGV[3]), owner)
return {2, redis.call('pttl', lockKey)}
