#!lua
-- Read-write lock, read side: acquire or re-enter a read hold, recorded under the attempt's own id.
-- KEYS[1]  write hold           <prefix>:{<name>}:rw:write     hash owner -> hold count, with the write lease
-- KEYS[2]  readers              <prefix>:{<name>}:rw:read      zset owner -> expiry (server ms), see rw-readers.lua
-- KEYS[3]  read hold counts     <prefix>:{<name>}:rw:read:counts  hash owner -> hold count
-- KEYS[4]  writer intents       <prefix>:{<name>}:rw:writers   zset intent -> deadline (server ms), see rw-writers.lua
-- KEYS[5]  fencing counter      <prefix>:{<name>}:rw:fence     moved by write grants only (see fencing.lua)
-- KEYS[6]  read hold ids        <prefix>:{<name>}:rw:read:grants  hold id -> its record (see hold-ids.lua)
-- ARGV[1]  lease in ms          whole number in 1..31536000000
-- ARGV[2]  owner id             opaque text, never parsed
-- ARGV[3]  hold id              this attempt's own id: the hold it takes is recorded under it, and a
--                               repeat of the attempt (sent again after a lost reply) finds that record
-- ARGV[4]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Granted when nobody else holds the write side and, for an owner holding nothing yet, no writer
-- waits; a re-entry of a current reader and a read by the writer itself (downgrade) never wait.
-- Returns  {'granted', token}    acquired; token = the last write grant's fencing token (when the
--                                counter is gone, one from the clock, see currentToken in fencing.lua)
--          {'reentered', token}  re-entered; the hold's expiry is never shortened
--                                (a repeat whose hold is live: the same reply as its first run; nothing
--                                changes but an expiry made at least ARGV[1] from now)
--          {'refused', ms}       the write holder's remaining lease, or until the earliest writer
--                                intent lapses unless refreshed (a release or a writer giving up wakes
--                                earlier); also a repeat whose hold has ended or was cancelled
--                                (nothing changes)
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include server-time.lua
--!include rw-readers.lua
--!include rw-writers.lua
--!include fencing.lua
local writeKey, readers, counts, writers, fence, grants = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local lease, owner = tonumber(ARGV[1]), ARGV[2]
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local holdId, badId = holdIdArgument(ARGV[3], 'hold id')
if badId then return badId end
local badIdle = idleTtlProblem(ARGV[4])
if badIdle then return badIdle end
local now = nowMs()
pruneReaders(readers, counts, grants, now)

-- Moves the owner's expiry to at least a lease from now, never shortening it.
local function extendReader()
  redis.call('zadd', readers, math.max(tonumber(redis.call('zscore', readers, owner)), now + lease), owner)
end

local kind, recorded, holder = readHold(grants, holdId)
if (kind == 'g' or kind == 'e') and holder == owner and redis.call('hexists', counts, owner) == 1 then
  -- A repeat of an attempt that landed: the same reply, and the lease it asked for.
  extendReader()
  keepGrants(grants, lease)
  touchReaders(readers, counts, grants, now)
  return {kind == 'g' and 'granted' or 'reentered', recorded}
end
if kind then
  -- A copy that comes after its hold ended, or after the caller gave it up: it must take nothing.
  return {'refused', math.max(0, redis.call('pttl', writeKey))}
end

local writerHolds = redis.call('hexists', writeKey, owner) == 1
if not writerHolds and redis.call('exists', writeKey) == 1 then
  return {'refused', redis.call('pttl', writeKey)}
end
if redis.call('hexists', counts, owner) == 1 then
  local token = currentToken(fence, lease + tonumber(ARGV[4]))
  redis.call('hincrby', counts, owner, 1)
  extendReader()
  recordHold(grants, holdId, 'e', token, owner, lease)
  touchReaders(readers, counts, grants, now)
  return {'reentered', token}
end
if not writerHolds then
  local deadline = liveIntent(writers, now)
  if deadline then return {'refused', deadline - now} end
end
local token = currentToken(fence, lease + tonumber(ARGV[4]))
redis.call('hset', counts, owner, 1)
redis.call('zadd', readers, now + lease, owner)
recordHold(grants, holdId, 'g', token, owner, lease)
touchReaders(readers, counts, grants, now)
return {'granted', token}
