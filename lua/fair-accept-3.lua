#!lua flags=allow-oom
-- Fair lock: the wait the lock was handed to (told so by the hand-off message) takes it over,
-- replacing the short acceptance lease with its own; the hold is recorded under the accepting
-- attempt's own id (see hold-ids.lua). The waiter waits for this reply before its critical section
-- runs: after a failover the message may come from a master whose hand-off the promoted replica never
-- received, and only this script, run on the current master, can tell. Only the wait the lock was
-- handed to can accept it: not another wait of the same owner, nor a message a process took for one
-- of its own. Safe to send again after an unknown outcome: a repeat finds its own record (accepted),
-- and a copy that comes after its attempt was cancelled (see claim-attempt-3.lua) takes nothing.
-- KEYS[1]  lock hash            (see fair-lock-7.lua)
-- KEYS[2]  hold ids             (see hold-ids.lua)
-- KEYS[3]  fencing counter      the hand-off's token, and the epoch of the holds that count
-- ARGV[1]  lease in ms (whole number in 1..31536000000)
-- ARGV[2]  owner id             the owner the wait is for
-- ARGV[3]  waiter id            the wait the hand-off message named ('<client id>:<nonce>')
-- ARGV[4]  hold id              the accepting attempt's own id
-- ARGV[5]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Returns  1 accepted (by this attempt, now or in an earlier copy, and still held), 0 not handed to
--          this wait (any more: the acceptance lease ran out first, or it never was), or the hold this
--          attempt took has ended; error BADARG (nothing changed) for unusable arguments
--!include fair-queue.lua
--!include hold-ids.lua
local lease, owner, waiterId = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
local bad = ownerProblem(owner) or waiterIdProblem(waiterId) or idleTtlProblem(ARGV[5])
if bad then return bad end
local holdId, badId = holdIdArgument(ARGV[4], 'hold id')
if badId then return badId end
local lockKey, grants = KEYS[1], KEYS[2]
local epoch = epochOf(KEYS[3])
local kind, _, holder = readHold(grants, holdId, epoch)
if kind == 'g' and holder == owner and ownerHolds(lockKey, owner) then
  -- A repeat of an acceptance that landed.
  if redis.call('pttl', lockKey) < lease then redis.call('pexpire', lockKey, lease) end
  keepGrants(grants, lease)
  keepFence(KEYS[3], lease + tonumber(ARGV[5]))
  return 1
end
if kind then return 0 end
if grantedTo(lockKey) ~= waiterEntry(owner, waiterId) or redis.call('hget', lockKey, owner) ~= '0' then return 0 end
redis.call('hset', lockKey, owner, 1)
redis.call('pexpire', lockKey, lease)
keepFence(KEYS[3], lease + tonumber(ARGV[5]))
recordHold(grants, holdId, 'g', epoch, owner, lease, epoch)
return 1
