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
--          error BADARG before any write when an argument is unusable (nothing is changed)
local lockKey, queueKey, deadlineKey, fenceKey, channelPrefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease, owner = tonumber(ARGV[1]), ARGV[2]
local staleAfter, acceptanceLease, publish = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local function wholeMs(value, max) return value and value >= 1 and value <= max and value % 1 == 0 end
if not wholeMs(lease, 31536000000) then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
if not wholeMs(staleAfter, 2147483647) then
  return redis.error_reply('BADARG stale-waiter timeout must be whole ms in 1..2147483647, got ' .. tostring(ARGV[3]))
end
if not wholeMs(acceptanceLease, 2147483647) then
  return redis.error_reply('BADARG acceptance lease must be whole ms in 1..2147483647, got ' .. tostring(ARGV[4]))
end
if publish ~= 'publish' and publish ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(publish))
end
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

-- pcall: a string here is a simple lock's hold (another owner): queue up behind it
local held = redis.pcall('hget', lockKey, owner)
if type(held) ~= 'string' then held = nil end
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

while redis.call('exists', lockKey) == 0 do
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
  -- Free, but a live waiter is ahead of us (its holder expired without a release): hand it over,
  -- unless nobody listens for it (its process died or is reconnecting): then drop it and look again.
  redis.call('lpop', queueKey)
  redis.call('zrem', deadlineKey, head)
  local token = redis.call('incr', fenceKey)
  if redis.call(publish, channelPrefix .. ':' .. string.match(head, '^[^:]*'), head .. '|' .. token) > 0 then
    redis.call('hset', lockKey, head, 0)
    redis.call('pexpire', lockKey, acceptanceLease)
  end
end

if not redis.call('zscore', deadlineKey, owner) then
  redis.call('rpush', queueKey, owner)
end
redis.call('zadd', deadlineKey, now + staleAfter, owner)
return {2, redis.call('pttl', lockKey)}
