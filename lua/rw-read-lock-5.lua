#!lua
-- Read-write lock, read side: acquire or re-enter a read hold.
-- KEYS[1]  write hold           <prefix>:{<name>}:rw:write     hash owner -> hold count, with the write lease
-- KEYS[2]  readers              <prefix>:{<name>}:rw:read      zset owner -> expiry (server ms), see rw-readers.lua
-- KEYS[3]  read hold counts     <prefix>:{<name>}:rw:read:counts  hash owner -> hold count
-- KEYS[4]  writer intents       <prefix>:{<name>}:rw:writers   zset owner -> deadline (server ms), see rw-writers.lua
-- KEYS[5]  fencing counter      <prefix>:{<name>}:rw:fence     incremented by each write grant only
-- ARGV[1]  lease in ms          whole number in 1..31536000000
-- ARGV[2]  owner id
-- ARGV[3]  holds before         the read holds the caller knows the owner has ('' = not said): one more
--                               means this attempt already landed (see repeated-attempt.lua)
-- Granted when nobody else holds the write side and, for an owner holding nothing yet, no writer
-- waits; a re-entry of a current reader and a read by the writer itself (downgrade) never wait.
-- Returns  {'granted', token}    acquired; token = the last write grant's fencing token (0 if none yet)
--          {'reentered', token}  re-entered; the hold's expiry is never shortened
--                                (a repeat that already landed: the same reply as its first run; nothing changes)
--          {'refused', ms}       the write holder's remaining lease, or until the earliest writer
--                                intent lapses unless refreshed (a release or a writer giving up wakes earlier)
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include server-time.lua
--!include rw-readers.lua
--!include rw-writers.lua
--!include repeated-attempt.lua
local writeKey, readers, counts, writers, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease, owner = tonumber(ARGV[1]), ARGV[2]
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local heldBefore, badHeld = heldBeforeArgument(ARGV[3])
if badHeld then return badHeld end
local now = nowMs()
local token = tonumber(redis.call('get', fence) or '0')

local writerHolds = redis.call('hexists', writeKey, owner) == 1
if not writerHolds and redis.call('exists', writeKey) == 1 then
  return {'refused', redis.call('pttl', writeKey)}
end
pruneReaders(readers, counts, now)
if redis.call('hexists', counts, owner) == 1 then
  if alreadyLanded(redis.call('hget', counts, owner), heldBefore) then
    redis.call('zadd', readers, math.max(tonumber(redis.call('zscore', readers, owner)), now + lease), owner)
    touchReaders(readers, counts, now)
    return {heldBefore == 0 and 'granted' or 'reentered', token}
  end
  redis.call('hincrby', counts, owner, 1)
  local expiry = math.max(tonumber(redis.call('zscore', readers, owner)), now + lease)
  redis.call('zadd', readers, expiry, owner)
  touchReaders(readers, counts, now)
  return {'reentered', token}
end
if not writerHolds then
  local deadline = liveIntent(writers, now)
  if deadline then return {'refused', deadline - now} end
end
redis.call('hset', counts, owner, 1)
redis.call('zadd', readers, now + lease, owner)
touchReaders(readers, counts, now)
return {'granted', token}
