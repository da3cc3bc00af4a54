-- Reentrant lock: extend the lease, only while the owner still holds it.
-- KEYS[1]  lock hash
-- ARGV[1]  lease in ms (whole number in 1..31536000000)
-- ARGV[2]  owner id
-- Returns  1 renewed, 0 not held by this owner (lost); error BADARG (nothing changed) for a bad lease
local lease = tonumber(ARGV[1])
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
-- pcall: a string here is a simple lock's hold, not ours
if redis.pcall('hexists', KEYS[1], ARGV[2] or '') == 1 then
  redis.call('pexpire', KEYS[1], lease)
  return 1
end
return 0
