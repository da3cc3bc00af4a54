#!lua flags=allow-oom
-- Watchdog: renew many held locks in one call (any mix of hash locks, simple-lock strings, read
-- holds and semaphore permits), and keep each name's fencing counter a lease + ARGV[1] (see fencing.lua).
-- KEYS     the keys of each lock in ARGV order (a variable number; on a Cluster all in one slot): for
--          'hash' and 'string' the lock key, then its fencing counter; for 'held' the lock hash, its
--          hold ids (see hold-ids.lua), then its fencing counter; for 'read' the readers zset, the
--          read-count hash, the read hold ids (see rw-readers.lua), then the fencing counter; for
--          'permit' the semaphore's holds, its fencing counter, then its run-time limit
-- ARGV[1]  idle key TTL in ms   how long a fencing counter outlives the lease (see fencing.lua)
-- ARGV     then three values per lock: kind ('hash': owner is a field of the lock hash; 'held': the same,
--          with the hold ids' hash kept alive as long as the lock, and a lease never shortened ('held-set':
--          set, shorter or not: extend(leaseTime)); 'string': the
--          lock's value is the owner's token; 'read': a read hold of a read-write lock, owner ->
--          expiry in the readers zset, never moved earlier ('read-set': set), its hold ids kept alive as
--          long; 'permit': owner is a member
--          of a semaphore's holds, see include/semaphore-holds.lua), lease in ms, owner id, token or
--          member
-- Returns  one entry per lock: 1 renewed, 0 not held by that owner any more (a fair lock handed to a
--          wait of the owner and not accepted yet, count 0, is not held; a read hold or a permit
--          whose own expiry has passed stays expired); error BADARG before any renewal when any
--          triple is unusable or the key count does not match the kinds (all or nothing)
-- pcall: a key that changed type (taken over by another lock kind) reads as not held instead of
-- failing the renewal of every other lock in the call.
--!include server-time.lua
--!include rw-readers.lua
--!include hold-ids.lua
--!include fencing.lua
local badIdle = idleTtlProblem(ARGV[1])
if badIdle then return badIdle end
local idle = tonumber(ARGV[1])
if (#ARGV - 1) % 3 ~= 0 then
  return redis.error_reply('BADARG expected the idle key TTL, then 3 arguments per lock, got ' .. #ARGV)
end
-- Keys per kind: the lock's own, then its fencing counter (and a semaphore's limit).
local KEYS_OF = { hash = 2, held = 3, ['held-set'] = 3, string = 2, read = 4, ['read-set'] = 4, permit = 3 }
local locks, keyCount, leases = (#ARGV - 1) / 3, 0, {}
for i = 1, locks do
  local kind, lease = ARGV[3 * i - 1], tonumber(ARGV[3 * i])
  if not KEYS_OF[kind] then
    return redis.error_reply('BADARG kind must be hash, held, held-set, string, read, read-set or permit, got ' .. tostring(kind))
  end
  if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
    return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[3 * i]))
  end
  leases[i] = lease
  keyCount = keyCount + KEYS_OF[kind]
end
if keyCount ~= #KEYS then
  return redis.error_reply('BADARG expected ' .. keyCount .. ' keys for these kinds, got ' .. #KEYS)
end

local results, k, now = {}, 1, nil
for i = 1, locks do
  local kind, owner, key = ARGV[3 * i - 1], ARGV[3 * i + 1], KEYS[k]
  local held
  if kind == 'hash' or kind == 'held' or kind == 'held-set' then
    -- A count of 0 is a fair lock handed to a wait of the owner and not accepted yet: no hold (see
    -- fair-queue.lua), so a record of an earlier hold of that owner is not renewed by it.
    local count = redis.pcall('hget', key, owner)
    held = type(count) == 'string' and count ~= '0'
    -- 'held' never shortens the lease: an explicit owner shared by two processes has one lease for
    -- both, and the other's hold may count on a longer one. 'held-set' sets it (extend(leaseTime)).
    if held and kind == 'held' then
      keepAtLeast(key, leases[i])
    elseif held then
      redis.call('pexpire', key, leases[i])
    end
    if held and kind ~= 'hash' then keepGrants(KEYS[k + 1], leases[i]) end
  elseif kind == 'string' then
    held = redis.pcall('get', key) == owner
    if held then redis.call('pexpire', key, leases[i]) end
  elseif kind == 'permit' then
    now = now or nowMs()
    -- A permit whose lease ended is lost even before a script reclaims it.
    local deadline = redis.pcall('zscore', key, owner)
    held = type(deadline) == 'string' and tonumber(deadline) > now
    if held then
      redis.call('zadd', key, 'xx', now + leases[i], owner)
      -- The holds set outlives its longest lease; never shorten another hold's.
      if redis.call('pttl', key) < leases[i] then redis.call('pexpire', key, leases[i]) end
      keepFence(KEYS[k + 2], leases[i] + idle)
    end
  else
    now = now or nowMs()
    held = renewReader(key, KEYS[k + 1], KEYS[k + 2], owner, now + leases[i], leases[i], now, kind == 'read-set')
  end
  -- The fencing counter is the last key of 'hash', 'held', 'string' and 'read', the second of 'permit'.
  local fence = kind == 'permit' and KEYS[k + 1] or KEYS[k + KEYS_OF[kind] - 1]
  if held then keepFence(fence, leases[i] + idle) end
  k = k + KEYS_OF[kind]
  results[i] = held and 1 or 0
end
return results
