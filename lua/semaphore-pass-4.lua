#!lua flags=allow-oom
-- Semaphore: a process's group of waiters for n permits leaves the waiting registry (its last waiter
-- gave up, or a wake-up reached it when it had no waiter left) and, if permits are free, a group that
-- can take them is woken, so that a release is never spent on waiters that no longer wait.
-- KEYS[1]  holds              (see semaphore-acquire-5.lua)
-- KEYS[2]  run-time limit     (see semaphore-acquire-5.lua)
-- KEYS[3]  channel prefix     (see semaphore-acquire-5.lua)
-- KEYS[4]  waiting groups     (see semaphore-acquire-5.lua)
-- ARGV[1]  client id of the process leaving
-- ARGV[2]  permits            whole number in 1..2147483647: the group that leaves waits for this many
-- ARGV[3]  configured limit   whole number in 1..2147483647, used when KEYS[2] is not set
-- ARGV[4]  publish command    'publish' or 'spublish'
-- Returns  1 another group woken, 0 nothing to do (no permit free, or no group that can take them waits);
--          error BADARG (nothing changed) for unusable arguments
--!include server-time.lua
--!include semaphore-holds.lua
--!include semaphore-waiting.lua
local holdsKey, limitKey, channel, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local client, permits, configured, publish = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
if not client or client == '' then return redis.error_reply('BADARG client id is empty') end
if not wholeNumber(permits, 1, 2147483647) then
  return redis.error_reply('BADARG permits must be a whole number in 1..2147483647, got ' .. tostring(ARGV[2]))
end
local badLimit = limitAndPublishProblem(ARGV[3], publish)
if badLimit then return badLimit end
redis.call('zrem', waitingKey, waitingGroup(permits, client))
local available = freePermits(holdsKey, currentLimit(limitKey, configured), nowMs())
return wakeGroupThatFits(waitingKey, channel, publish, available) and 1 or 0
