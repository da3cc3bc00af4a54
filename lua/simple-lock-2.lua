-- Simple lock: SET NX PX, not re-entrant.
-- KEYS[1]  lock string          <prefix>:{<name>}        value = token unique to this acquisition
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence
-- ARGV[1]  token
-- ARGV[2]  lease in ms          whole number in 1..31536000000
-- Returns  {0, fencingToken}   acquired
--          {2, pttl}           held (by anyone, this owner included: it does not nest)
--          error BADARG before any write when an argument is unusable
local token, lease = ARGV[1], tonumber(ARGV[2])
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
if redis.call('set', KEYS[1], token, 'px', lease, 'nx') then
  return {0, redis.call('incr', KEYS[2])}
end
return {2, redis.call('pttl', KEYS[1])}
