#!lua flags=allow-oom
-- Fair lock: the wait the lock was handed to (told so by the hand-off message) takes it over,
-- replacing the short acceptance lease with its own. The waiter waits for this reply before its
-- critical section runs: after a failover the message may come from a master whose hand-off the
-- promoted replica never received, and only this script, run on the current master, can tell.
-- Only the wait the lock was handed to can accept it: not another wait of the same owner, nor a
-- message a process took for one of its own. Safe to send again after an unknown outcome: a hand-off
-- this wait already accepted counts as accepted.
-- KEYS[1]  lock hash
-- ARGV[1]  lease in ms (whole number in 1..31536000000)
-- ARGV[2]  owner id             the owner the wait is for
-- ARGV[3]  waiter id            the wait the hand-off message named ('<client id>:<nonce>')
-- Returns  1 accepted (now or before), 0 not handed to this wait (any more: the acceptance lease ran
--          out first, or it never was); error BADARG (nothing changed) for unusable arguments
--!include fair-queue.lua
local lease, owner, waiterId = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
local bad = ownerProblem(owner) or waiterIdProblem(waiterId)
if bad then return bad end
if grantedTo(KEYS[1]) ~= waiterEntry(owner, waiterId) then return 0 end
local count = redis.call('hget', KEYS[1], owner)
if count == '0' then
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], lease)
  return 1
end
if count then
  if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
  return 1
end
return 0
