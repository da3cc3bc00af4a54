#!lua
-- Reentrant lock: acquire or re-enter; a refused waiter's process is registered to be woken.
-- KEYS[1]  lock hash            <prefix>:{<name>}          field = owner id, value = hold count
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence    kept a lease + ARGV[6] (see fencing.lua)
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting  client id -> time it registered (µs)
-- KEYS[4]  hand-over            <prefix>:{<name>}:next     client id the free lock is reserved for (see hand-over.lua)
-- KEYS[5]  hold ids             <prefix>:{<name>}:grants   hold id -> its record (see hold-ids.lua)
-- ARGV[1]  lease in ms          whole number in 1..31536000000
-- ARGV[2]  owner id             opaque text, never parsed
-- ARGV[3]  client id of the caller's process
-- ARGV[4]  waiting flag         '1' the caller waits if refused and its client has other waiters for
--                               this lock; '0' it waits, no other; '-' it waits, no other, and was never
--                               refused (its client is not registered); 'once' a single attempt (never registered)
-- ARGV[5]  hold id              this attempt's own id: the hold it takes is recorded under it, and a
--                               repeat of the attempt (sent again after a lost reply) finds that record
-- ARGV[6]  idle key TTL in ms   how long the fencing counter outlives the lease (see fencing.lua)
-- Returns  {'granted', token, others}  acquired; token = new fencing token (see fencing.lua);
--                                 others = 1 when other processes wait for the lock, else 0
--          {'reentered', token}   hold count + 1; token = the current holder's token
--                                 (a repeat whose hold is live: the same reply as its first run, 'others' 0;
--                                 nothing changes but a lease made at least ARGV[1] long)
--          {'refused', pttl}      held by another owner, or free but reserved for another process;
--                                 pttl = how long that lasts at most, in ms (also a repeat whose hold has
--                                 ended or was cancelled: nothing changes)
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include waiting-args.lua
--!include idle-ttl.lua
--!include lease-text.lua
--!include exclusive-token.lua
--!include grant-record.lua
local lease = tonumber(ARGV[1])
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
local owner, client, flag = ARGV[2], ARGV[3], ARGV[4]
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local problem = checkWaitingArgs(client, flag)
if problem then return redis.error_reply(problem) end
local holdId, badId = holdIdArgument(ARGV[5], 'hold id')
if badId then return badId end
local badIdle = idleTtlProblem(ARGV[6])
if badIdle then return badIdle end
local fenceKeep = lease + tonumber(ARGV[6])
local leaseArg = leaseText(ARGV[1], lease)

-- No record under this id (the attempt's first copy), the lock free, not reserved, and no process
-- waiting: the uncontended case, granted before anything else is defined (each step a script defines
-- costs Redis something at every call). One EXISTS for the lock, the waiting registry and the
-- hand-over: each is counted as often as it is named, so the count is odd exactly when the lock exists
-- (and 0 when none does).
local existing
if not recordValue(KEYS[5], holdId) then
  existing = redis.call('exists', KEYS[1], KEYS[3], KEYS[3], KEYS[4], KEYS[4])
  if existing == 0 then
    redis.call('hset', KEYS[1], owner, '1')
    redis.call('pexpire', KEYS[1], leaseArg)
    local token = nextExclusiveToken(KEYS[2], fenceKeep)
    recordFirstGrant(KEYS[5], holdId, token, owner, lease)
    return {'granted', token, 0}
  end
end
--!include hold-ids.lua
--!include fencing.lua
-- A record under this id: a copy of an attempt (the fencing counter is the epoch of the live holds;
-- read only when a live record needs it).
local kind, token, holder = readHold(KEYS[5], holdId, KEYS[2])
if kind == 'g' or kind == 'e' then
  if holder == owner and redis.pcall('hexists', KEYS[1], owner) == 1 then
    -- A repeat of an attempt that landed: the same reply, and the lease it asked for.
    keepAtLeast(KEYS[1], lease)
    keepGrants(KEYS[5], lease)
    keepFence(KEYS[2], fenceKeep)
    if kind == 'g' then return {'granted', token, 0} end
    return {'reentered', token}
  end
  kind = 'x'
end
if kind then
  -- A copy that comes after its hold ended, or after the caller gave it up: it must take nothing.
  return {'refused', math.max(0, redis.call('pttl', KEYS[1]))}
end
-- Past the uncontended case (no record under this id, so `existing` was counted above, and is not 0):
-- the steps of the waiting registry and the hand-over (defined only here, as above).
--!include waiting-registration.lua
--!include hand-over.lua
if existing % 2 == 0 then
  local reservedTtl, mine = reservation(KEYS[4], client)
  if reservedTtl then
    registerWaiting(KEYS[3], client, flag)
    return {'refused', reservedTtl}
  end
  -- A hand-over is used up by the grant; this process's own turn keeps the lock reserved for it.
  if mine == 'pass' then redis.call('del', KEYS[4]) end
  redis.call('hset', KEYS[1], owner, '1')
  redis.call('pexpire', KEYS[1], leaseArg)
  grantedWaiting(KEYS[3], client, flag)
  local others = othersWaiting(KEYS[3], client)
  local token = nextExclusiveToken(KEYS[2], fenceKeep)
  recordHold(KEYS[5], holdId, 'g', token, owner, lease, token, true)
  return {'granted', token, others and 1 or 0}
end
-- pcall: a string here is a simple lock's hold: held by another owner
if redis.pcall('hexists', KEYS[1], owner) == 1 then
  redis.call('hincrby', KEYS[1], owner, 1)
  -- never shorten the lease an outer hold (or its watchdog) relies on
  keepAtLeast(KEYS[1], lease)
  grantedWaiting(KEYS[3], client, flag)
  local epoch = epochOf(KEYS[2])
  keepFence(KEYS[2], fenceKeep)
  recordHold(KEYS[5], holdId, 'e', epoch, owner, lease, epoch)
  return {'reentered', epoch}
end
registerWaiting(KEYS[3], client, flag)
return {'refused', redis.call('pttl', KEYS[1])}
