#!lua
-- Semaphore: change the limit at run time, for every process (it is stored, and wins over the limit
-- each client was configured with). Current holders keep their permits when it shrinks; new
-- acquisitions wait until fewer than the new limit are held. When permits are free, a waiting group
-- that can take them is woken (a waiter granted with permits left over wakes the next).
-- KEYS[1]  holds              (see semaphore-acquire-5.lua)
-- KEYS[2]  run-time limit     kept while permits are held and ARGV[3] after (acquisitions and renewals
--                             keep it as long as the fencing counter, see fencing.lua)
-- KEYS[3]  channel prefix     (see semaphore-acquire-5.lua)
-- KEYS[4]  waiting groups     (see semaphore-acquire-5.lua)
-- ARGV[1]  limit              whole number in 1..2147483647
-- ARGV[2]  publish command    'publish' or 'spublish'
-- ARGV[3]  idle key TTL in ms (see fencing.lua)
-- Returns  permits free under the new limit (negative: held beyond it after a shrink);
--          error BADARG (nothing changed) for unusable arguments
--!include server-time.lua
--!include semaphore-holds.lua
--!include semaphore-waiting.lua
--!include fencing.lua
local holdsKey, limitKey, channel, limit, publish = KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), ARGV[2]
local badLimit = limitAndPublishProblem(ARGV[1], publish)
if badLimit then return badLimit end
local badIdle = idleTtlProblem(ARGV[3])
if badIdle then return badIdle end
redis.call('set', limitKey, limit, 'px', math.max(0, redis.call('pttl', holdsKey)) + tonumber(ARGV[3]))
local available = freePermits(holdsKey, limit, nowMs())
wakeGroupThatFits(KEYS[4], channel, publish, available)
return available
