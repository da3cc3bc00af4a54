#!lua
-- Read-write lock, write side: acquire or re-enter the write hold; a refused writer that waits
-- registers (or refreshes) its intent, which holds back new readers (see rw-writers.lua).
-- KEYS[1]  write hold           hash owner -> hold count, with the write lease (see rw-read-lock-5.lua)
-- KEYS[2]  readers              zset owner -> expiry (server ms)
-- KEYS[3]  read hold counts     hash owner -> hold count
-- KEYS[4]  writer intents       zset owner -> deadline (server ms)
-- KEYS[5]  fencing counter      never expires, so tokens only grow
-- ARGV[1]  lease in ms          whole number in 1..31536000000
-- ARGV[2]  owner id
-- ARGV[3]  intent timeout in ms: a refused writer's intent lapses this long after its last attempt;
--          '0' = a single attempt, which registers no intent
-- ARGV[4]  holds before         the write holds the caller knows the owner has ('' = not said): one more
--                               means this attempt already landed (see repeated-attempt.lua)
-- Granted when nobody holds the write side and no read hold is live. The writer may hold read holds
-- of its own taken after its write hold (downgrade): they do not stop its re-entry.
-- Returns  {'granted', token}    acquired; token = new fencing token (INCR of KEYS[5])
--          {'reentered', token}  re-entered; token = the holder's token
--                                (a repeat that already landed: the same reply as its first run; nothing changes)
--          {'refused', ms}       the write holder's remaining lease, or until the earliest read hold
--                                runs out (a release wakes earlier)
--          {'holds-read', 0}     refused for good: this owner holds a read hold and no write hold (a
--                                reader cannot upgrade: two upgrading readers would wait for each other)
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include server-time.lua
--!include rw-readers.lua
--!include rw-writers.lua
--!include repeated-attempt.lua
local writeKey, readers, counts, writers, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease, owner, intentMs = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
if not intentMs or intentMs < 0 or intentMs > 2147483647 or intentMs % 1 ~= 0 then
  return redis.error_reply('BADARG intent timeout must be whole ms in 0..2147483647, got ' .. tostring(ARGV[3]))
end
local heldBefore, badHeld = heldBeforeArgument(ARGV[4])
if badHeld then return badHeld end
local now = nowMs()

if redis.call('hexists', writeKey, owner) == 1 then
  if alreadyLanded(redis.call('hget', writeKey, owner), heldBefore) then
    extendLease(writeKey, lease)
    return {heldBefore == 0 and 'granted' or 'reentered', tonumber(redis.call('get', fence) or '0')}
  end
  redis.call('hincrby', writeKey, owner, 1)
  if redis.call('pttl', writeKey) < lease then redis.call('pexpire', writeKey, lease) end
  return {'reentered', tonumber(redis.call('get', fence) or '0')}
end
pruneReaders(readers, counts, now)
if redis.call('hexists', counts, owner) == 1 then return {'holds-read', 0} end

local wait = nil
if redis.call('exists', writeKey) == 1 then
  wait = redis.call('pttl', writeKey)
elseif liveReaders(readers, now) > 0 then
  wait = tonumber(redis.call('zrange', readers, 0, 0, 'withscores')[2]) - now
end
if wait then
  if intentMs > 0 then
    redis.call('zadd', writers, now + intentMs, owner)
    touchWriters(writers, now)
  end
  return {'refused', wait}
end
redis.call('hset', writeKey, owner, 1)
redis.call('pexpire', writeKey, lease)
if redis.call('zrem', writers, owner) == 1 then touchWriters(writers, now) end
return {'granted', redis.call('incr', fence)}
