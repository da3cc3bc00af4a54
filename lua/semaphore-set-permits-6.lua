#!lua
-- Semaphore: change the limit at run time, for every process (it is stored, and wins over the limit
-- each client was configured with). Current holders keep their permits when it shrinks; new
-- acquisitions wait until fewer than the new limit are held. Permits free under the new limit are
-- handed to the longest-waiting acquisitions that fit (see include/semaphore-queue.lua).
-- KEYS[1]  holds              (see semaphore-acquire-7.lua)
-- KEYS[2]  run-time limit     kept while permits are held and ARGV[3] after (acquisitions and renewals
--                             keep it as long as the fencing counter, see fencing.lua)
-- KEYS[3]  fencing counter    (see semaphore-acquire-7.lua)
-- KEYS[4]  channel prefix     (see semaphore-acquire-7.lua)
-- KEYS[5]  waiting queue      (see semaphore-acquire-7.lua)
-- KEYS[6]  queue deadlines    (see semaphore-acquire-7.lua)
-- ARGV[1]  limit              whole number in 1..2147483647
-- ARGV[2]  publish command    'publish' or 'spublish'
-- ARGV[3]  idle key TTL in ms (see fencing.lua)
-- ARGV[4]  acceptance lease   (see semaphore-acquire-7.lua)
-- Returns  permits free under the new limit once handed over (negative: held beyond it after a shrink);
--          error BADARG (nothing changed) for unusable arguments
--!include semaphore-queue.lua
local holdsKey, limitKey, limit, publish = KEYS[1], KEYS[2], tonumber(ARGV[1]), ARGV[2]
local badLimit = limitAndPublishProblem(ARGV[1], publish)
if badLimit then return badLimit end
local badIdle = idleTtlProblem(ARGV[3])
if badIdle then return badIdle end
local badAcceptance = acceptanceLeaseProblem(ARGV[4])
if badAcceptance then return badAcceptance end
redis.call('set', limitKey, limit, 'px', math.max(0, redis.call('pttl', holdsKey)) + tonumber(ARGV[3]))
local now = nowMs()
local q = {
  holds = holdsKey, limit = limitKey, fence = KEYS[3], channel = KEYS[4], waiting = KEYS[5],
  deadlines = KEYS[6],
  publish = publish, acceptance = tonumber(ARGV[4]), idle = tonumber(ARGV[3]), now = now,
}
return handOverFree(q, freePermits(holdsKey, limit, now))
