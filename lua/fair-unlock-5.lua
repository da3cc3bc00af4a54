#!lua flags=allow-oom
-- Fair lock: release one hold; on the last one hand the lock straight to the next live waiter.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  channel prefix       the wait it is handed to is told on <KEYS[5]>:<its client id>, message
--                               '<waiter id>|<fencing token>' (see fair-queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms, re-applied while holds remain
-- ARGV[3]  acceptance lease in ms for the waiter the lock is handed to
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  expected hold count before this release, as the client counts it ('' = unknown): a repeat
--          of a release that already landed (sent again after an unknown outcome) changes nothing
-- Returns  'released' (and handed over if anyone waits), 'decremented' (holds remain, or a repeat),
--          'not-locked', 'not-owner' (locked by another owner, or handed to a wait of this owner and
--          not accepted yet, which is no hold of the owner's: nothing changed);
--          error BADARG before any write when an argument is unusable
--!include fair-queue.lua
local owner = ARGV[1]
local bad = ownerProblem(owner) or fairArgumentProblem(ARGV[2], ARGV[3]) or publishCommandProblem(ARGV[4])
if bad then return bad end
local expected = nil
if ARGV[5] ~= nil and ARGV[5] ~= '' then
  expected = tonumber(ARGV[5])
  if not expected or expected < 1 or expected > 2147483647 or expected % 1 ~= 0 then
    return redis.error_reply('BADARG expected hold count must be a whole number >= 1, got ' .. tostring(ARGV[5]))
  end
end
local lease = tonumber(ARGV[2])
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[4], acceptanceLease = tonumber(ARGV[3]), now = nowMs(),
}

if redis.call('exists', fair.lock) == 0 then
  -- Expired under its holder: nobody told the queue, so hand it over now.
  handToNextWaiter(fair)
  return 'not-locked'
end
local count = redis.pcall('hget', fair.lock, owner)
count = type(count) == 'string' and tonumber(count) or nil
-- The lock exists (checked above): no hold of this owner means another owner's.
if not count then return 'not-owner' end
-- One hold fewer than the client counted: this release landed before (its reply was lost).
if expected and count > 0 and count == expected - 1 then return 'decremented' end
-- Handed to one wait of this owner (count 0): that wait accepts it or passes it on, never a release.
if count == 0 then return 'not-owner' end
if count > 1 then
  redis.call('hincrby', fair.lock, owner, -1)
  if redis.call('pttl', fair.lock) < lease then redis.call('pexpire', fair.lock, lease) end
  return 'decremented'
end
redis.call('del', fair.lock)
handToNextWaiter(fair)
return 'released'
