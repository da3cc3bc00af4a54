#!lua flags=allow-oom
-- Semaphore: give back the permits of one hold and hand the permits now free to the longest-waiting
-- acquisitions that fit (see include/semaphore-queue.lua). The hold member is unique to one
-- acquisition, so sending the release again is harmless, and a repeat replies as the first run did
-- (it finds the member gone, and hands nothing over again): an application's ioredis client sends a
-- command again on its new connection when the old one died before the reply came, and the caller
-- hears the repeat's reply, not the first run's.
-- With ARGV[7], a wait that ended leaves: its entry leaves the queue, and permits handed to it that it
-- will never use (its wait ended before the message came) are given back the same way; its member is
-- remembered as released, held or queued, so that a late copy of its attempt takes nothing.
-- KEYS[1]  holds              (see semaphore-acquire-7.lua)
-- KEYS[2]  run-time limit     (see semaphore-acquire-7.lua)
-- KEYS[3]  fencing counter    (see semaphore-acquire-7.lua)
-- KEYS[4]  channel prefix     (see semaphore-acquire-7.lua)
-- KEYS[5]  waiting queue      (see semaphore-acquire-7.lua)
-- KEYS[6]  queue deadlines    (see semaphore-acquire-7.lua)
-- KEYS[7]  recent releases    <prefix>:{<name>}:permits:released  hold member -> time (ms, server) until
--                             which a repeat of its release still replies 'released' (and a late copy
--                             of its acquire takes nothing)
-- ARGV[1]  hold member        '<permits>:<hold id>'
-- ARGV[2]  configured limit   whole number in 1..2147483647, used when KEYS[2] is not set
-- ARGV[3]  publish command    'publish' or 'spublish'
-- ARGV[4]  memory in ms       how long a repeat still replies 'released' (the caller waits no longer for
--                             a reply: its operation timeout); whole number in 1..31536000000
-- ARGV[5]  acceptance lease   (see semaphore-acquire-7.lua)
-- ARGV[6]  idle key TTL in ms (see fencing.lua)
-- ARGV[7]  '' for a release; the client id of a wait that ended, to take it out of the queue too
-- Returns  'released' (also for a repeat within the memory), or 'not-locked' when not held (its lease
--          had ended, or it was released longer ago); error BADARG (nothing changed) for unusable arguments
--!include semaphore-queue.lua
local holdsKey, limitKey, releasedKey = KEYS[1], KEYS[2], KEYS[7]
local member, configured, publish, memory = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local leaving = ARGV[7]
if not member or permitsOf(member) < 1 then
  return redis.error_reply('BADARG hold member must be "<permits>:<hold id>", got ' .. tostring(member))
end
local badLimit = limitAndPublishProblem(ARGV[2], publish)
if badLimit then return badLimit end
if not wholeNumber(memory, 1, 31536000000) then
  return redis.error_reply('BADARG memory must be whole ms in 1..31536000000, got ' .. tostring(ARGV[4]))
end
local badAcceptance = acceptanceLeaseProblem(ARGV[5])
if badAcceptance then return badAcceptance end
local badIdle = idleTtlProblem(ARGV[6])
if badIdle then return badIdle end
if leaving == nil then return redis.error_reply('BADARG leaving client id is missing') end

local now, nowUs = serverNow()
local q = {
  holds = holdsKey, limit = limitKey, fence = KEYS[3], channel = KEYS[4], waiting = KEYS[5],
  deadlines = KEYS[6],
  publish = publish, acceptance = tonumber(ARGV[5]), idle = tonumber(ARGV[6]), now = now, nowUs = nowUs,
}
local wasQueued = leaving ~= '' and leaveQueue(q, queueEntry(leaving, member))
local freed, used = reclaimAndCount(holdsKey, now)
local released = redis.call('zrem', holdsKey, member) == 1
if released or freed > 0 then
  -- A member released was live (an expired one was reclaimed above): its permits are free now.
  if released then used = used - permitsOf(member) end
  local limit, limitStored = currentLimit(limitKey, configured)
  q.limitStored = limitStored
  handOverFree(q, limit - used)
end
local reply = 'released'
if not released then
  local remembered = tonumber(redis.call('zscore', releasedKey, member))
  if not (remembered and remembered > now) then reply = 'not-locked' end
end
if released or wasQueued then
  -- Remembered: a repeat replies the same, and a late copy of the member's attempt takes nothing; so
  -- is a wait that ended queued, holding nothing (a copy of its attempt may still be on its way). A
  -- wait none of whose attempts ran leaves no trace.
  redis.call('zremrangebyscore', releasedKey, '-inf', now)
  redis.call('zadd', releasedKey, now + memory, member)
  keepAtLeast(releasedKey, memory)
end
return reply
