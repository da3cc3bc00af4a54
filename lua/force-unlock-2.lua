-- Any lock kind: delete the lock whoever holds it, and wake waiters.
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel
-- ARGV[1]  publish command      'publish' or 'spublish'
-- ARGV[2]  message
-- Returns  1 deleted, 0 was not locked; error BADARG (nothing changed) for an unknown publish command
if ARGV[1] ~= 'publish' and ARGV[1] ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(ARGV[1]))
end
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[1], KEYS[2], ARGV[2] or '')
  return 1
end
return 0
