#!lua flags=allow-oom
-- Reentrant lock: release one hold. Safe to send again after an unknown outcome (a connection that
-- dropped before the reply): with the hold count it expects, a repeat of a release that already
-- landed changes nothing, so an outer re-entry is never released by a duplicate.
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel       <prefix>:{<name>}:unlock (same hash tag, so SPUBLISH stays on the slot);
--                               a waiting process listens on <KEYS[2]>:<its client id>
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting (see lock-4.lua)
-- KEYS[4]  hand-over            <prefix>:{<name>}:next (see hand-over.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms, re-applied while holds remain (whole number in 1..31536000000)
-- ARGV[3]  publish command      'publish' or 'spublish'
-- ARGV[4]  message              sent to the one waiting process woken (see wake-one-process.lua)
-- ARGV[5]  expected hold count before this release, as the client counts it ('' = unknown)
-- ARGV[6]  'pass' to hand the lock over to the longest-waiting process; 'keep' while the releasing
--          process's turn lasts: nobody is woken, the process re-acquires or passes it on itself
-- ARGV[7]  client id of the releasing process (needed with 'keep': its own registration is not a rival)
-- Returns  'released'     last hold: key deleted; handed over to a waiting process if any
--          'kept'         last hold, with 'keep' while other processes than the caller's wait: nobody woken
--          'decremented'  one hold released, others remain (or this release had already landed)
--          'not-locked'   not locked at all (expired or never taken)
--          'not-owner'    locked by another owner; nothing changed
--          error BADARG before any write when an argument is unusable
--!include hand-over.lua
--!include release-arguments.lua
local owner, publish, handOverMode = ARGV[1], ARGV[3], ARGV[6]
local lease, expected, bad = releaseArguments(owner, ARGV[2], publish, ARGV[5])
if bad then return bad end
if handOverMode ~= 'pass' and handOverMode ~= 'keep' then
  return redis.error_reply('BADARG hand-over must be pass or keep, got ' .. tostring(handOverMode))
end
local client = ARGV[7]
if handOverMode == 'keep' and (not client or client == '') then
  return redis.error_reply('BADARG client id is empty')
end

-- pcall: a string here is a simple lock's hold (another owner), not an error
local count = redis.pcall('hget', KEYS[1], owner)
count = type(count) == 'string' and tonumber(count) or nil
local shortcut = releaseShortcut(count, function() return redis.call('exists', KEYS[1]) == 1 end, expected)
if shortcut then return shortcut end
if count > 1 then
  redis.call('hincrby', KEYS[1], owner, -1)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  return 'decremented'
end
redis.call('del', KEYS[1])
if handOverMode == 'keep' then
  return othersWaiting(KEYS[3], client) and 'kept' or 'released'
end
handOver(KEYS[3], KEYS[2], KEYS[4], publish, ARGV[4] or '')
return 'released'
