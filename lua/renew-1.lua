-- Reentrant lock: extend the lease, only while the owner still holds it.
-- KEYS[1]  lock hash
-- ARGV[1]  lease in ms
-- ARGV[2]  owner id
-- Returns  1 renewed, 0 not held by this owner (lost)
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
