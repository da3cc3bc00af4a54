-- Simple lock: compare-and-delete, then wake one waiter per process.
-- KEYS[1]  lock string
-- KEYS[2]  unlock channel
-- ARGV[1]  token of this acquisition
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  message
-- Returns  1 released, 0 held under another token (nothing changed), -1 not locked (expired)
if redis.call('exists', KEYS[1]) == 0 then
  return -1
end
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[3])
return 1
