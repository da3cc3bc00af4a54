-- Reentrant lock: release one hold.
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel       <prefix>:{<name>}:unlock (same hash tag, so SPUBLISH stays on the slot)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms, re-applied while holds remain
-- ARGV[3]  publish command      'publish' or 'spublish'
-- ARGV[4]  message              wakes one waiter per subscribed process
-- Returns  1   released (last hold): key deleted, message published
--          0   one hold released, others remain
--         -1   not locked at all (expired or never taken)
--         -2   locked by another owner; nothing changed
if redis.call('exists', KEYS[1]) == 0 then
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -2
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[4])
return 1
