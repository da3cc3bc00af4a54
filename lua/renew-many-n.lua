#!lua flags=allow-oom
-- Watchdog: renew many held locks in one call (any mix of hash locks, simple-lock strings, read
-- holds and semaphore permits).
-- KEYS     the keys of each lock in ARGV order (a variable number; on a Cluster all in one slot): one
--          key for 'hash', 'string' and 'permit', two for 'held' (the lock hash, then its hold ids,
--          see hold-ids.lua), three for 'read' (the readers zset, the read-count hash, then the read
--          hold ids, see rw-readers.lua)
-- ARGV     three values per lock: kind ('hash': owner is a field of the lock hash; 'held': the same,
--          with the hold ids' hash kept alive as long as the lock; 'string': the
--          lock's value is the owner's token; 'read': a read hold of a read-write lock, owner ->
--          expiry in the readers zset, its hold ids kept alive as long; 'permit': owner is a member
--          of a semaphore's holds, see include/semaphore-holds.lua), lease in ms, owner id, token or
--          member
-- Returns  one entry per lock: 1 renewed, 0 not held by that owner any more (a read hold or a permit
--          whose own expiry has passed stays expired); error BADARG before any renewal when any
--          triple is unusable or the key count does not match the kinds (all or nothing)
-- pcall: a key that changed type (taken over by another lock kind) reads as not held instead of
-- failing the renewal of every other lock in the call.
--!include server-time.lua
--!include rw-readers.lua
--!include hold-ids.lua
if #ARGV % 3 ~= 0 then
  return redis.error_reply('BADARG expected 3 arguments per lock, got ' .. #ARGV)
end
local locks, keyCount, leases = #ARGV / 3, 0, {}
for i = 1, locks do
  local kind, lease = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1])
  if kind ~= 'hash' and kind ~= 'held' and kind ~= 'string' and kind ~= 'read' and kind ~= 'permit' then
    return redis.error_reply('BADARG kind must be hash, held, string, read or permit, got ' .. tostring(kind))
  end
  if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
    return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[3 * i - 1]))
  end
  leases[i] = lease
  keyCount = keyCount + (kind == 'read' and 3 or kind == 'held' and 2 or 1)
end
if keyCount ~= #KEYS then
  return redis.error_reply('BADARG expected ' .. keyCount .. ' keys for these kinds, got ' .. #KEYS)
end

local results, k, now = {}, 1, nil
for i = 1, locks do
  local kind, owner, key = ARGV[3 * i - 2], ARGV[3 * i], KEYS[k]
  local held
  if kind == 'hash' or kind == 'held' then
    held = redis.pcall('hexists', key, owner) == 1
    if held then redis.call('pexpire', key, leases[i]) end
    if kind == 'held' then
      if held then keepGrants(KEYS[k + 1], leases[i]) end
      k = k + 1
    end
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
    end
  else
    now = now or nowMs()
    held = renewReader(key, KEYS[k + 1], KEYS[k + 2], owner, now + leases[i], leases[i], now)
    k = k + 2
  end
  k = k + 1
  results[i] = held and 1 or 0
end
return results
