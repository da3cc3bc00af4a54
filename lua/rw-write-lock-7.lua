#!lua
-- Read-write lock, write side: acquire or re-enter the write hold, recorded under the attempt's own id;
-- a refused writer that waits registers (or refreshes) its intent, which holds back new readers (see
-- rw-writers.lua).
-- KEYS[1]  write hold           hash owner -> hold count, with the write lease (see rw-read-lock-6.lua)
-- KEYS[2]  readers              zset owner -> expiry (server ms)
-- KEYS[3]  read hold counts     hash owner -> hold count
-- KEYS[4]  writer intents       zset '<owner id>\0<wait id>' -> deadline (server ms), see rw-writers.lua
-- KEYS[5]  fencing counter      kept a lease + ARGV[5] (see fencing.lua)
-- KEYS[6]  write hold ids       <prefix>:{<name>}:rw:write:grants  hold id -> its record (see hold-ids.lua;
--                               a record's epoch is the fencing counter, which only a write grant moves)
-- KEYS[7]  read hold ids        (see rw-read-lock-6.lua): read holds that ran out are pruned with
--                               their records
-- ARGV[1]  lease in ms          whole number in 1..31536000000
-- ARGV[2]  owner id             any text without NUL; never parsed
-- ARGV[3]  intent timeout in ms: a refused writer's intent lapses this long after its last attempt;
--          '0' = a single attempt, which registers no intent
-- ARGV[4]  hold id              this attempt's own id: the hold it takes is recorded under it, and a
--                               repeat of the attempt (sent again after a lost reply) finds that record
-- Granted when nobody holds the write side and no read hold is live. The writer may hold read holds
-- of its own taken after its write hold (downgrade): they do not stop its re-entry.
-- ARGV[5]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- ARGV[6]  wait id              made once per lock() or tryLock() call, the same for all its attempts:
--                               the intent is this wait's, and only this wait's goes with its grant
-- Returns  {'granted', token}    acquired; token = new fencing token (see fencing.lua)
--          {'reentered', token}  re-entered; token = the holder's token
--                                (a repeat whose hold is live: the same reply as its first run; nothing
--                                changes but a lease made at least ARGV[1] long)
--          {'refused', ms}       the write holder's remaining lease, or until the earliest read hold
--                                runs out (a release wakes earlier); also a repeat whose hold has ended
--                                or was cancelled (nothing changes)
--          {'holds-read', 0}     refused for good: this owner holds a read hold and no write hold (a
--                                reader cannot upgrade: two upgrading readers would wait for each other)
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include server-time.lua
--!include rw-readers.lua
--!include rw-writers.lua
--!include fencing.lua
local writeKey, readers, counts, writers, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local grants, readGrants = KEYS[6], KEYS[7]
local lease, owner, intentMs, waitId = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[6]
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
local badIntent = intentArgumentProblem(owner, waitId)
if badIntent then return badIntent end
if not intentMs or intentMs < 0 or intentMs > 2147483647 or intentMs % 1 ~= 0 then
  return redis.error_reply('BADARG intent timeout must be whole ms in 0..2147483647, got ' .. tostring(ARGV[3]))
end
local holdId, badId = holdIdArgument(ARGV[4], 'hold id')
if badId then return badId end
local badIdle = idleTtlProblem(ARGV[5])
if badIdle then return badIdle end
local fenceKeep = lease + tonumber(ARGV[5])
local intent = writerIntent(owner, waitId)

local epoch = epochOf(fence)
local kind, token, holder = readHold(grants, holdId, epoch)
if (kind == 'g' or kind == 'e') and holder == owner and redis.call('hexists', writeKey, owner) == 1 then
  -- A repeat of an attempt that landed: the same reply, and the lease it asked for.
  if redis.call('pttl', writeKey) < lease then redis.call('pexpire', writeKey, lease) end
  keepGrants(grants, lease)
  keepFence(fence, fenceKeep)
  return {kind == 'g' and 'granted' or 'reentered', token}
end
if kind then
  -- A copy that comes after its hold ended (or its lock ran out), or after the caller gave it up: it
  -- must take nothing.
  return {'refused', math.max(0, redis.call('pttl', writeKey))}
end
local now = nowMs()

if redis.call('hexists', writeKey, owner) == 1 then
  redis.call('hincrby', writeKey, owner, 1)
  if redis.call('pttl', writeKey) < lease then redis.call('pexpire', writeKey, lease) end
  -- This wait may have waited (while another wait of its owner took the lock): its intent ends here.
  if redis.call('zrem', writers, intent) == 1 then touchWriters(writers, now) end
  keepFence(fence, fenceKeep)
  recordHold(grants, holdId, 'e', epoch, owner, lease, epoch)
  return {'reentered', epoch}
end
pruneReaders(readers, counts, readGrants, now)
if redis.call('hexists', counts, owner) == 1 then return {'holds-read', 0} end

local wait = nil
if redis.call('exists', writeKey) == 1 then
  wait = redis.call('pttl', writeKey)
elseif liveReaders(readers, now) > 0 then
  wait = tonumber(redis.call('zrange', readers, 0, 0, 'withscores')[2]) - now
end
if wait then
  if intentMs > 0 then
    redis.call('zadd', writers, now + intentMs, intent)
    touchWriters(writers, now)
  end
  return {'refused', wait}
end
redis.call('hset', writeKey, owner, 1)
redis.call('pexpire', writeKey, lease)
if redis.call('zrem', writers, intent) == 1 then touchWriters(writers, now) end
local first = nextToken(fence, fenceKeep)
recordHold(grants, holdId, 'g', first, owner, lease, first)
return {'granted', first}
