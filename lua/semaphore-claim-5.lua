#!lua flags=allow-oom
-- Semaphore: claim a hold granted already, its lease set to ARGV[2] exactly, as a renewal does: an
-- attempt whose reply never came may have been granted, or permits handed to it (the hand-over's
-- acceptance lease may be longer than the lease the caller asked for). Nothing else is taken or
-- queued, so it needs no memory a renewal would not: it runs on a Redis at its maxmemory limit, where
-- a new grant (semaphore-acquire-7.lua) is refused. Run twice, the second run finds the same hold.
-- KEYS[1]  holds              (see semaphore-acquire-7.lua)
-- KEYS[2]  run-time limit     (see semaphore-acquire-7.lua)
-- KEYS[3]  fencing counter    (see semaphore-acquire-7.lua)
-- KEYS[4]  waiting queue      (see semaphore-acquire-7.lua)
-- KEYS[5]  queue deadlines    (see semaphore-acquire-7.lua)
-- ARGV[1]  hold member        '<permits>:<hold id>'
-- ARGV[2]  lease in ms        whole number in 1..31536000000
-- ARGV[3]  client id of the caller's process (its entry in the queue, which a claimed hold leaves)
-- ARGV[4]  idle key TTL in ms how long the fencing counter and the limit outlive the lease (see fencing.lua)
-- Returns  {'granted', token}  the member holds (its lease not over): its lease becomes ARGV[2] from
--                              now, and it gets a new token (the counter as it is may be another hold's,
--                              granted since: two holds never share a token)
--          {'refused', -1}     the member holds nothing (never granted, released, or its lease ended)
--          error BADARG before any write when an argument is unusable
--!include semaphore-queue.lua
local holdsKey, limitKey, fenceKey = KEYS[1], KEYS[2], KEYS[3]
local member, lease, client = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if not member or permitsOf(member) < 1 then
  return redis.error_reply('BADARG hold member must be "<permits>:<hold id>", got ' .. tostring(member))
end
if not wholeNumber(lease, 1, 31536000000) then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
if client == nil or client == '' then return redis.error_reply('BADARG client id is empty') end
local badIdle = idleTtlProblem(ARGV[4])
if badIdle then return badIdle end

local now = nowMs()
local leaseEnd = tonumber(redis.call('zscore', holdsKey, member))
-- A lease that ended is no hold, whether or not a script reclaimed it yet.
if not leaseEnd or leaseEnd <= now then return {'refused', -1} end
redis.call('zadd', holdsKey, 'xx', now + lease, member)
keepAtLeast(holdsKey, lease)
keepFence(limitKey, lease + tonumber(ARGV[4])) -- the stored limit outlives the hold, as at a grant
leaveQueue({ waiting = KEYS[4], deadlines = KEYS[5] }, queueEntry(client, member))
return {'granted', nextToken(fenceKey, lease + tonumber(ARGV[4]))}
