#!lua
-- Semaphore: take `permits` permits at once, or none (all or nothing: a partial grab could deadlock).
-- KEYS[1]  holds              <prefix>:{<name>}:permits        see include/semaphore-holds.lua
-- KEYS[2]  run-time limit     <prefix>:{<name>}:permits:limit  set by setPermits; kept as long as the fence
-- KEYS[3]  fencing counter    <prefix>:{<name>}:permits:fence  kept a lease + ARGV[8] (see fencing.lua)
-- KEYS[4]  channel prefix     <prefix>:{<name>}:permits:free   a client's waiters listen on <KEYS[4]>:<client id>
-- KEYS[5]  waiting queue      <prefix>:{<name>}:permits:waiting            see include/semaphore-queue.lua
-- KEYS[6]  queue deadlines    <prefix>:{<name>}:permits:waiting:deadlines  see include/semaphore-queue.lua
-- KEYS[7]  recent releases    <prefix>:{<name>}:permits:released           see semaphore-release-7.lua
-- ARGV[1]  hold member        '<permits>:<hold id>', the hold id unique to this acquisition (every
--                             attempt of one wait sends the same)
-- ARGV[2]  permits            whole number in 1..2147483647, equal to the member's prefix
-- ARGV[3]  lease in ms        whole number in 1..31536000000
-- ARGV[4]  configured limit   whole number in 1..2147483647, used when KEYS[2] is not set
-- ARGV[5]  publish command    'publish' or 'spublish'
-- ARGV[6]  client id of the caller's process (its channel)
-- ARGV[7]  mode               'once' (a single attempt: never queues), 'wait' (a refused caller queues),
--                             'queued' (refused before); in any mode the caller may be queued already (an
--                             earlier attempt of its wait, or a copy whose reply was lost, queued it: a
--                             wait's later attempt is 'once' while its client resubscribes): it is never
--                             handed its own permits here, and leaves the queue if granted
--                             (a claim of a member held already, with nothing else taken, is
--                             semaphore-claim-5.lua's: it runs on a full Redis)
-- ARGV[8]  idle key TTL in ms how long the fencing counter and the limit outlive a lease (see fencing.lua)
-- ARGV[9]  acceptance lease   ms, whole number in 1..2147483647: the lease of permits handed to a waiter
-- ARGV[10] stale waiter ms    whole number in 1..2147483647: a queued waiter not refreshed for this long is dead
-- Returns  {'granted', token, available}  token = new fencing token, available = permits still free;
--                                         the member held already (a repeat of this attempt, or a
--                                         hand-over to it): its lease becomes ARGV[3] from now, and it
--                                         gets a new token too (the counter as it is may be another
--                                         hold's, granted since: two holds never share a token)
--          {'refused', ms, available, now}  ms until the earliest lease ends (-1: no hold to wait for),
--                                         available = permits free now, now = Redis server time (ms)
--                                         of this refusal: a hand-over to this member comes no earlier
--          {'refused', -2, limit}         more permits asked for than the current limit: never grantable
--                                         as it stands (nothing registered)
--          error BADARG before any write when an argument is unusable
-- A member released lately (a late copy of an attempt whose acquisition is over) is refused, and
-- queues nothing. Expired holds are reclaimed first, and free permits go to the queue ahead of the
-- caller first.
--!include semaphore-queue.lua
local holdsKey, limitKey, fenceKey = KEYS[1], KEYS[2], KEYS[3]
local member, permits, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local configured, publish, client, mode = tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7]
local stale = tonumber(ARGV[10])
if not wholeNumber(permits, 1, 2147483647) then
  return redis.error_reply('BADARG permits must be a whole number in 1..2147483647, got ' .. tostring(ARGV[2]))
end
if not member or permitsOf(member) ~= permits or #member <= #ARGV[2] + 1 then
  return redis.error_reply('BADARG hold member must be "<permits>:<hold id>", got ' .. tostring(member))
end
if not wholeNumber(lease, 1, 31536000000) then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[3]))
end
local badLimit = limitAndPublishProblem(ARGV[4], publish)
if badLimit then return badLimit end
if client == nil or client == '' then return redis.error_reply('BADARG client id is empty') end
if mode ~= 'once' and mode ~= 'wait' and mode ~= 'queued' then
  return redis.error_reply('BADARG mode must be once, wait or queued, got ' .. tostring(mode))
end
local badIdle = idleTtlProblem(ARGV[8])
if badIdle then return badIdle end
local badAcceptance = acceptanceLeaseProblem(ARGV[9])
if badAcceptance then return badAcceptance end
if not wholeNumber(stale, 1, 2147483647) then
  return redis.error_reply('BADARG stale waiter timeout must be whole ms in 1..2147483647, got ' .. tostring(ARGV[10]))
end

local now, nowUs = serverNow()
local limit, limitStored = currentLimit(limitKey, configured)
local q = {
  holds = holdsKey, limit = limitKey, fence = fenceKey, channel = KEYS[4], waiting = KEYS[5],
  deadlines = KEYS[6],
  publish = publish, acceptance = tonumber(ARGV[9]), idle = tonumber(ARGV[8]), now = now, nowUs = nowUs,
  limitStored = limitStored,
}
local available = freePermits(holdsKey, limit, now)
local entry = queueEntry(client, member)
if redis.call('zscore', holdsKey, member) then
  -- Held already (this attempt sent again, or permits handed to it): the lease is this call's from now.
  -- An attempt never shortens it (a copy of it sent again must not cut a lease its caller has extended
  -- since).
  redis.call('zadd', holdsKey, 'gt', now + lease, member)
  keepAtLeast(holdsKey, lease)
  if limitStored then keepFence(limitKey, lease + q.idle) end -- the stored limit outlives the hold, as at a first grant
  leaveQueue(q, entry)
  -- A new token, not the counter as it is: that is the last one handed out, maybe to another hold
  -- since (the same release's next hand-over, a newcomer's grant). The token this hold got when it
  -- was handed over went out in a message this caller did not believe, and is not stored.
  return {'granted', nextToken(fenceKey, lease + q.idle), math.max(available, 0)}
end
-- Free permits go to the queue first, in its order (a crashed holder's whose lease ended, or ones the
-- holds set's own expiry dropped unseen), up to this caller's own place.
-- Not past the caller's own entry, if it is queued: a hand-over to it here would be recorded and then
-- queued again below (a hold that is also a waiter, handed its permits anew after its release).
q.self = entry
available = handOverFree(q, available)
if tonumber(redis.call('zscore', KEYS[7], member) or '0') > now then
  -- Released lately: a late copy of an attempt whose acquisition is over. It must take nothing.
  return {'refused', -1, math.max(available, 0), now}
end
if permits <= available then
  redis.call('zadd', holdsKey, now + lease, member)
  keepAtLeast(holdsKey, lease)
  leaveQueue(q, entry)
  local keep = lease + q.idle
  if limitStored then keepFence(limitKey, keep) end
  return {'granted', nextToken(fenceKey, keep), available - permits}
end
if permits > limit then
  -- No release can ever make room at this limit (setPermits lowered it): the caller is told at once.
  return {'refused', -2, limit}
end
if mode ~= 'once' then joinQueue(q, entry, stale) end
local earliest = redis.call('zrange', holdsKey, 0, 0, 'withscores')[2]
return {'refused', earliest and math.max(1, tonumber(earliest) - now) or -1, math.max(available, 0), now}
