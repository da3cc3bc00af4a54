-- Reentrant lock: release one hold. Safe to send again after an unknown outcome (a connection that
-- dropped before the reply): with the hold count it expects, a repeat of a release that already
-- landed changes nothing, so an outer re-entry is never released by a duplicate.
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel       <prefix>:{<name>}:unlock (same hash tag, so SPUBLISH stays on the slot);
--                               a waiting process listens on <KEYS[2]>:<its client id>
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting (see lock-3.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms, re-applied while holds remain (whole number in 1..31536000000)
-- ARGV[3]  publish command      'publish' or 'spublish'
-- ARGV[4]  message              sent to the one waiting process woken (see wake-one-process.lua)
-- ARGV[5]  expected hold count before this release, as the client counts it ('' = unknown)
-- Returns  1   released (last hold): key deleted, one waiting process woken
--          0   one hold released, others remain (or this release had already landed)
--         -1   not locked at all (expired or never taken)
--         -2   locked by another owner; nothing changed
--          error BADARG before any write when an argument is unusable
--!include wake-one-process.lua
--!include release-arguments.lua
local owner, publish = ARGV[1], ARGV[3]
local lease, expected, bad = releaseArguments(owner, ARGV[2], publish, ARGV[5])
if bad then return bad end

-- pcall: a string here is a simple lock's hold (another owner), not an error
local count = redis.pcall('hget', KEYS[1], owner)
count = type(count) == 'string' and tonumber(count) or nil
if not count then
  if redis.call('exists', KEYS[1]) == 0 then return -1 end
  return -2
end
if expected and count > 0 and count == expected - 1 then
  return 0 -- a repeat of a release that already landed
end
if count > 1 then
  redis.call('hincrby', KEYS[1], owner, -1)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  return 0
end
redis.call('del', KEYS[1])
wakeOneProcess(KEYS[3], KEYS[2], publish, ARGV[4] or '')
return 1
