#!lua flags=allow-oom
-- Reentrant or simple lock: a process passes the lock on without holding it: its last waiter gave
-- up, a wake-up reached it when it had no waiter left, or its turn ended with the lock free. It
-- leaves the waiting registry, gives up a hand-over reserved for it, and, if the lock is free and
-- reserved for nobody else, hands it over to the next process, so that a release is never spent on
-- a process that no longer wants the lock. While another process's turn holds the lock reserved, the
-- next process in line is told when that turn ends instead: this one may have been the one told.
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel       (see unlock-6.lua)
-- KEYS[3]  waiting processes    (see lock-5.lua)
-- KEYS[4]  hand-over            (see hand-over.lua)
-- ARGV[1]  client id passing
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  message
-- Returns  1 another process woken and the lock reserved for it, 0 nothing of that (the lock is held or
--          reserved, or nobody else waits); error BADARG (nothing changed) for unusable arguments
--!include hand-over.lua
if not ARGV[1] or ARGV[1] == '' then return redis.error_reply('BADARG client id is empty') end
if ARGV[2] ~= 'publish' and ARGV[2] ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(ARGV[2]))
end
redis.call('zrem', KEYS[3], ARGV[1])
local kind, reservedFor, ttl = readReservation(KEYS[4])
if kind == 'turn' and reservedFor ~= ARGV[1] then
  wakeOneProcess(KEYS[3], KEYS[2], ARGV[2], tryAfterMessage(ttl), reservedFor)
  return 0
end
if redis.call('exists', KEYS[1]) == 1 then return 0 end
if kind and reservedFor ~= ARGV[1] then return 0 end
return handOver(KEYS[3], KEYS[2], KEYS[4], ARGV[2], ARGV[3] or '') and 1 or 0
