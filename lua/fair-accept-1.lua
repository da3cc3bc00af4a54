#!lua flags=allow-oom
-- Fair lock: the waiter the lock was handed to (told so by the hand-off message) takes it over,
-- replacing the short acceptance lease with its own. The waiter waits for this reply before its
-- critical section runs: after a failover the message may come from a master whose hand-off the
-- promoted replica never received, and only this script, run on the current master, can tell.
-- Safe to send again after an unknown outcome: a hold already accepted counts as accepted.
-- KEYS[1]  lock hash
-- ARGV[1]  lease in ms (whole number in 1..31536000000)
-- ARGV[2]  owner id
-- Returns  1 accepted (now or before), 0 not handed to this owner any more (the acceptance lease ran
--          out first); error BADARG (nothing changed) for unusable arguments
local lease, owner = tonumber(ARGV[1]), ARGV[2]
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local count = redis.pcall('hget', KEYS[1], owner)
if type(count) ~= 'string' then count = nil end
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
