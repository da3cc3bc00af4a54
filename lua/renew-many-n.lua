-- Watchdog: renew many held locks in one call (any mix of hash locks and simple-lock strings).
-- KEYS[i]  lock key (a variable number of keys; on a Cluster all in one slot)
-- ARGV     three values per key, in KEYS order: kind ('hash': owner is a field of the lock hash;
--          'string': the lock's value is the owner's token), lease in ms, owner id or token
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
  if kind ~= 'hash' and kind ~= 'string' then
    return redis.error_reply('BADARG kind must be hash or string, got ' .. tostring(kind))
  end
  if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
    return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[3 * i - 1]))
  end
  leases[i] = lease
end

local results = {}
for i, key in ipairs(KEYS) do
  local kind, owner = ARGV[3 * i - 2], ARGV[3 * i]
  local held
  if kind == 'hash' then
    held = redis.pcall('hexists', key, owner) == 1
  else
    held = redis.pcall('get', key) == owner
  end
  if held then
    redis.call('pexpire', key, leases[i])
    results[i] = 1
  else
    results[i] = 0
  end
end
return results
