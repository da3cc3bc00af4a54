-- Watchdog: renew many held locks in one call (any mix of hash locks and simple-lock strings).
-- KEYS[i]  lock key (a variable number of keys; on a Cluster all in one slot)
-- ARGV     three values per key, in KEYS order: kind ('hash': owner is a field of the lock hash;
--          'string': the lock's value is the owner's token), lease in ms, owner id or token
-- Returns  one entry per key: 1 renewed, 0 not held by that owner any more
-- pcall: a key that changed type (taken over by another lock kind) reads as not held instead of
-- failing the renewal of every other lock in the call.
local results = {}
for i, key in ipairs(KEYS) do
  local kind, lease, owner = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local held
  if kind == 'hash' then
    held = redis.pcall('hexists', key, owner) == 1
  else
    held = redis.pcall('get', key) == owner
  end
  if held then
    redis.call('pexpire', key, lease)
    results[i] = 1
  else
    results[i] = 0
  end
end
return results
