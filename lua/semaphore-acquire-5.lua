#!lua
-- Semaphore: take `permits` permits at once, or none (all or nothing: a partial grab could deadlock).
-- KEYS[1]  holds              <prefix>:{<name>}:permits        see include/semaphore-holds.lua
-- KEYS[2]  run-time limit     <prefix>:{<name>}:permits:limit  set by setPermits; kept as long as the fence
-- KEYS[3]  fencing counter    <prefix>:{<name>}:permits:fence  kept a lease + ARGV[9] (see fencing.lua)
-- KEYS[4]  channel prefix     <prefix>:{<name>}:permits:free   a process's waiters for n permits listen on
--                             <KEYS[4]>:<n>:<its client id>
-- KEYS[5]  waiting groups     <prefix>:{<name>}:permits:waiting '<n>:<client id>' -> time it registered (µs):
--                             permits coming free wake one group that can take them (see semaphore-waiting.lua)
-- ARGV[1]  hold member        '<permits>:<hold id>', the hold id unique to this acquisition
-- ARGV[2]  permits            whole number in 1..2147483647, equal to the member's prefix
-- ARGV[3]  lease in ms        whole number in 1..31536000000
-- ARGV[4]  configured limit   whole number in 1..2147483647, used when KEYS[2] is not set
-- ARGV[5]  publish command    'publish' or 'spublish'
-- ARGV[6]  '1' when the caller was refused before (it waits, woken by a message or re-checking): permits
--          left over after its grant, or that it cannot use when refused, wake a group that can take
--          them (the wake-up it used or could not use may have been meant for them too)
-- ARGV[7]  client id of the caller's process
-- ARGV[8]  waiting flag       (see waiting-registration.lua): a refused caller that waits registers its
--                             group '<permits>:<client id>'
-- ARGV[9]  idle key TTL in ms how long the fencing counter and the limit outlive a lease (see fencing.lua)
-- Returns  {'granted', token, available}  token = new fencing token, available = permits still free
--          {'refused', ms, available}     ms until the earliest lease ends (-1: no hold to wait for),
--                                         available = permits free now
--          {'refused', -2, limit}         more permits asked for than the current limit: never grantable
--                                         as it stands (nothing registered)
--          error BADARG before any write when an argument is unusable
-- Expired holds are reclaimed first; if that freed permits nobody takes here, a waiter is woken.
--!include server-time.lua
--!include semaphore-holds.lua
--!include publish-command.lua
--!include waiting-registration.lua
--!include semaphore-waiting.lua
--!include fencing.lua
local holdsKey, limitKey, fenceKey, channel, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local member, permits, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local configured, publish, chained = tonumber(ARGV[4]), ARGV[5], ARGV[6] == '1'
local client, flag = ARGV[7], ARGV[8]
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
local problem = checkWaitingArgs(client, flag)
if problem then return redis.error_reply(problem) end
local badIdle = idleTtlProblem(ARGV[9])
if badIdle then return badIdle end

local now = nowMs()
local limit = currentLimit(limitKey, configured)
local available, freed = freePermits(holdsKey, limit, now)
if redis.call('zscore', holdsKey, member) then
  -- The same acquisition sent again: it holds its permits already.
  return {'granted', tonumber(redis.call('get', fenceKey) or '0'), math.max(available, 0)}
end
local group = waitingGroup(permits, client)
-- Permits free that this caller does not take go to a group that can take them, when this call may
-- have used up or been given the wake-up meant for it.
local passOn = chained or freed > 0
if permits <= available then
  redis.call('zadd', holdsKey, now + lease, member)
  if redis.call('pttl', holdsKey) < lease then redis.call('pexpire', holdsKey, lease) end
  available = available - permits
  grantedWaiting(waitingKey, group, flag)
  if passOn then wakeGroupThatFits(waitingKey, channel, publish, available) end
  local keep = lease + tonumber(ARGV[9])
  keepFence(limitKey, keep)
  return {'granted', nextToken(fenceKey, keep), available}
end
if permits > limit then
  -- No release can ever make room at this limit (setPermits lowered it): the caller is told at once, and
  -- waits for nothing. A wake-up it used goes on.
  if passOn then wakeGroupThatFits(waitingKey, channel, publish, available) end
  return {'refused', -2, limit}
end
registerWaiting(waitingKey, group, flag)
if passOn then wakeGroupThatFits(waitingKey, channel, publish, available) end
local earliest = redis.call('zrange', holdsKey, 0, 0, 'withscores')[2]
return {'refused', earliest and math.max(1, tonumber(earliest) - now) or -1, math.max(available, 0)}
