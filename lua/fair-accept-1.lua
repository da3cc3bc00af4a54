-- Fair lock: the waiter the lock was handed to (told so by the hand-off message) takes it over,
-- replacing the short acceptance lease with its own. Sent as it enters its critical section, not
-- waited for first: the connection keeps order, so it lands before any re-entry or release.
-- KEYS[1]  lock hash
-- ARGV[1]  lease in ms
-- ARGV[2]  owner id
-- Returns  1 accepted, 0 not handed to this owner any more (the acceptance lease ran out first)
if redis.call('hget', KEYS[1], ARGV[2]) == '0' then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
