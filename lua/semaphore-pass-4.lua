#!lua flags=allow-oom
-- Semaphore: a process leaves the waiting registry (its last waiter gave up, or a wake-up reached it
-- when it had no waiter left) and, if permits are free, wakes the next process, so that a release is
-- never spent on a process that no longer waits.
-- KEYS[1]  holds              (see semaphore-acquire-5.lua)
-- KEYS[2]  run-time limit     (see semaphore-acquire-5.lua)
-- KEYS[3]  channel prefix     (see semaphore-acquire-5.lua)
-- KEYS[4]  waiting processes  (see semaphore-acquire-5.lua)
-- ARGV[1]  client id leaving
-- ARGV[2]  configured limit   whole number in 1..2147483647, used when KEYS[2] is not set
-- ARGV[3]  publish command    'publish' or 'spublish'
-- Returns  1 another process woken, 0 nothing to do (no permit free, or nobody else waits);
--          error BADARG (nothing changed) for unusable arguments
--!include server-time.lua
--!include semaphore-holds.lua
--!include publish-command.lua
--!include wake-one-process.lua
local holdsKey, limitKey, channel, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local client, configured, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if not client or client == '' then return redis.error_reply('BADARG client id is empty') end
local badLimit = limitAndPublishProblem(ARGV[2], publish)
if badLimit then return badLimit end
redis.call('zrem', waitingKey, client)
if freePermits(holdsKey, currentLimit(limitKey, configured), nowMs()) <= 0 then return 0 end
return wakeOneProcess(waitingKey, channel, publish, 'free') and 1 or 0
