-- Simple lock: extend the lease while the token is still ours.
-- KEYS[1]  lock string
-- ARGV[1]  lease in ms
-- ARGV[2]  token
-- Returns  1 renewed, 0 lost
if redis.call('get', KEYS[1]) == ARGV[2] then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
