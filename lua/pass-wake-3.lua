-- Reentrant or simple lock: a process leaves the waiting registry (its last waiter gave up, or a
-- wake-up reached it when it had no waiter left) and, if the lock is free, wakes the next process,
-- so that a release is never spent on a process that no longer wants the lock.
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel       (see unlock-3.lua)
-- KEYS[3]  waiting processes    (see lock-3.lua)
-- ARGV[1]  client id leaving
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  message
-- Returns  1 another process woken, 0 nothing to do (the lock is held, or nobody else waits);
--          error BADARG (nothing changed) for unusable arguments
--!include wake-one-process.lua
if not ARGV[1] or ARGV[1] == '' then return redis.error_reply('BADARG client id is empty') end
if ARGV[2] ~= 'publish' and ARGV[2] ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(ARGV[2]))
end
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('exists', KEYS[1]) == 1 then return 0 end
return wakeOneProcess(KEYS[3], KEYS[2], ARGV[2], ARGV[3] or '') and 1 or 0
