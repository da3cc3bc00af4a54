-- Simple lock: SET NX PX, not re-entrant.
-- KEYS[1]  lock string          <prefix>:{<name>}        value = token unique to this acquisition
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence
-- ARGV[1]  token
-- ARGV[2]  lease in ms
-- Returns  {0, fencingToken}   acquired
--          {2, pttl}           held (by anyone, this owner included: it does not nest)
if redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2], 'nx') then
  return {0, redis.call('incr', KEYS[2])}
end
return {2, redis.call('pttl', KEYS[1])}
