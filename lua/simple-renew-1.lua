-- Simple lock: extend the lease while the token is still ours.
-- KEYS[1]  lock string
-- ARGV[1]  lease in ms (whole number in 1..31536000000)
-- ARGV[2]  token
-- Returns  1 renewed, 0 lost; error BADARG (nothing changed) for a bad lease
local lease = tonumber(ARGV[1])
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
-- pcall: a hash here is another lock kind's hold, not ours
if ARGV[2] and ARGV[2] ~= '' and redis.pcall('get', KEYS[1]) == ARGV[2] then
  redis.call('pexpire', KEYS[1], lease)
  return 1
end
return 0
