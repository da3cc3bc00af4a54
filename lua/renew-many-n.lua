-- Watchdog: renew many held locks in one call (any mix of hash locks, simple-lock strings and
-- semaphore permits).
-- KEYS[i]  lock key (a variable number of keys; on a Cluster all in one slot)
-- ARGV     three values per key, in KEYS order: kind ('hash': owner is a field of the lock hash;
--          'string': the lock's value is the owner's token; 'permit': owner is a member of a
--          semaphore's holds, see include/semaphore-holds.lua), lease in ms, owner id, token or member
-- Returns  one entry per key: 1 renewed, 0 not held by that owner any more;
--          error BADARG before any renewal when any triple is unusable (all or nothing)
-- pcall: a key that changed type (taken over by another lock kind) reads as not held instead of
-- failing the renewal of every other lock in the call.
if #ARGV ~= 3 * #KEYS then
  return redis.error_reply('BADARG expected 3 arguments per key, got ' .. #ARGV .. ' for ' .. #KEYS .. ' keys')
end
local leases = {}
for i = 1, #KEYS do
  local kind, lease = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1])
  if kind ~= 'hash' and kind ~= 'string' and kind ~= 'permit' then
    return redis.error_reply('BADARG kind must be hash, string or permit, got ' .. tostring(kind))
  end
  if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
    return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[3 * i - 1]))
  end
  leases[i] = lease
end

local now -- Redis server time (ms), read once if a permit is renewed
local results = {}
for i, key in ipairs(KEYS) do
  local kind, owner = ARGV[3 * i - 2], ARGV[3 * i]
  local held
  if kind == 'hash' then
    held = redis.pcall('hexists', key, owner) == 1
  elseif kind == 'string' then
    held = redis.pcall('get', key) == owner
  else
    if not now then
      local time = redis.call('time')
      now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    end
    -- A permit whose lease ended is lost even before a script reclaims it.
    local deadline = redis.pcall('zscore', key, owner)
    held = type(deadline) == 'string' and tonumber(deadline) > now
    if held then redis.call('zadd', key, 'xx', now + leases[i], owner) end
  end
  if held and kind == 'permit' then
    -- The holds set outlives its longest lease; never shorten another hold's.
    if redis.call('pttl', key) < leases[i] then redis.call('pexpire', key, leases[i]) end
    results[i] = 1
  elseif held then
    redis.call('pexpire', key, leases[i])
    results[i] = 1
  else
    results[i] = 0
  end
end
return results
