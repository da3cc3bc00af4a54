-- Simple lock: SET NX PX, not re-entrant; a refused waiter's process is registered to be woken.
-- KEYS[1]  lock string          <prefix>:{<name>}          value = token unique to this acquisition
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting  (see lock-3.lua)
-- ARGV[1]  token
-- ARGV[2]  lease in ms          whole number in 1..31536000000
-- ARGV[3]  client id of a caller that waits if refused ('' = a single attempt: never registered)
-- ARGV[4]  '1' when that client has other waiters for this lock, '0' when not, '-' when not and
--          this waiter was never refused (so the client is not registered)
-- Returns  {0, fencingToken}   acquired
--          {2, pttl}           held (by anyone, this owner included: it does not nest)
--          error BADARG before any write when an argument is unusable
--!include waiting-registration.lua
local token, lease = ARGV[1], tonumber(ARGV[2])
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
local client, othersWaiting = ARGV[3], ARGV[4]
local problem = checkWaitingArgs(client, othersWaiting)
if problem then return redis.error_reply(problem) end
if redis.call('set', KEYS[1], token, 'px', lease, 'nx') then
  grantedWaiting(KEYS[3], client, othersWaiting)
  return {0, redis.call('incr', KEYS[2])}
end
registerWaiting(KEYS[3], client)
return {2, redis.call('pttl', KEYS[1])}
