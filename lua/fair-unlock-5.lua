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
-- ARGV[6]  expected hold count before this release, as the client counts it ('' = unknown): a repeat
--          of a release that already landed (sent again after an unknown outcome) changes nothing
-- Returns  1 released (and handed over if anyone waits), 0 holds remain (or a repeat),
--         -1 not locked, -2 locked by another owner (nothing changed);
--          error BADARG before any write when an argument is unusable
local lockKey, queueKey, deadlineKey, fenceKey, channelPrefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, force, publish = ARGV[1], ARGV[5] == '1', ARGV[4]
local lease, acceptanceLease = tonumber(ARGV[2]), tonumber(ARGV[3])
local expected = (ARGV[6] ~= nil and ARGV[6] ~= '') and tonumber(ARGV[6]) or nil
local function wholeMs(value, max) return value and value >= 1 and value <= max and value % 1 == 0 end
if not force and (not owner or owner == '') then return redis.error_reply('BADARG owner id is empty') end
if not wholeMs(lease, 31536000000) then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
if not wholeMs(acceptanceLease, 2147483647) then
  return redis.error_reply('BADARG acceptance lease must be whole ms in 1..2147483647, got ' .. tostring(ARGV[3]))
end
if publish ~= 'publish' and publish ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(publish))
end
if ARGV[6] ~= nil and ARGV[6] ~= '' and not wholeMs(expected, 2147483647) then
  return redis.error_reply('BADARG expected hold count must be a whole number >= 1, got ' .. tostring(ARGV[6]))
end
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

-- Hands the lock to the next live waiter that can hear it: a waiter nobody listens for (its process
-- died or is reconnecting) could never take it over, and would cost the others an acceptance lease.
local function handOver()
  while true do
    local head = nextLiveWaiter()
    if not head then return end
    local token = redis.call('incr', fenceKey)
    if redis.call(publish, channelPrefix .. ':' .. string.match(head, '^[^:]*'), head .. '|' .. token) > 0 then
      redis.call('hset', lockKey, head, 0)
      redis.call('pexpire', lockKey, acceptanceLease)
      return
    end
  end
end

if redis.call('exists', lockKey) == 0 then
  -- Expired under its holder: nobody told the queue, so hand it over now.
  handOver()
  return -1
end
if not force then
  local count = redis.pcall('hget', lockKey, owner)
  count = type(count) == 'string' and tonumber(count) or nil
  if not count then return -2 end
  if expected and count > 0 and count == expected - 1 then return 0 end
  if count > 1 then
    redis.call('hincrby', lockKey, owner, -1)
    if redis.call('pttl', lockKey) < lease then redis.call('pexpire', lockKey, lease) end
    return 0
  end
end
redis.call('del', lockKey)
handOver()
return 1
