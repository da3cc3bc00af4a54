-- Fair lock: release one hold; on the last one hand the lock straight to the next live waiter.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       the new holder is told on <KEYS[5]>:<first segment of its owner id>,
--                               message '<owner id>|<fencing token>': it holds the lock from now on
-- ARGV[1]  owner id ('' with ARGV[5] = '1')
-- ARGV[2]  lease in ms, re-applied while holds remain
-- ARGV[3]  acceptance lease in ms for the waiter the lock is handed to
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  '1' = force: release whoever holds it; also used by a waiter that gives up (abandon)
-- Returns  1 released (and handed over if anyone waits), 0 holds remain,
--         -1 not locked, -2 locked by another owner (nothing changed)
local lockKey, queueKey, deadlineKey, fenceKey, channelPrefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, force = ARGV[1], ARGV[5] == '1'
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function nextLiveWaiter()
  while true do
    local head = redis.call('lindex', queueKey, 0)
    if not head then return nil end
    redis.call('lpop', queueKey)
    local deadline = tonumber(redis.call('zscore', deadlineKey, head))
    redis.call('zrem', deadlineKey, head)
    if deadline and deadline > now then return head end
  end
end

local function handOver()
  local head = nextLiveWaiter()
  if not head then return end
  redis.call('hset', lockKey, head, 0)
  redis.call('pexpire', lockKey, tonumber(ARGV[3]))
  local token = redis.call('incr', fenceKey)
  redis.call(ARGV[4], channelPrefix .. ':' .. string.match(head, '^[^:]*'), head .. '|' .. token)
end

if redis.call('exists', lockKey) == 0 then
  -- Expired under its holder: nobody told the queue, so hand it over now.
  handOver()
  return -1
end
if not force then
  local count = redis.call('hget', lockKey, owner)
  if not count then return -2 end
  if tonumber(count) > 1 then
    redis.call('hincrby', lockKey, owner, -1)
    if redis.call('pttl', lockKey) < tonumber(ARGV[2]) then redis.call('pexpire', lockKey, ARGV[2]) end
    return 0
  end
end
redis.call('del', lockKey)
handOver()
return 1
