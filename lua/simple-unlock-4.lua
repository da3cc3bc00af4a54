#!lua flags=allow-oom
-- Simple lock: compare-and-delete, then hand the lock over to one waiting process. The token is
-- unique to one acquisition, so sending it again after an unknown outcome is safe.
-- KEYS[1]  lock string
-- KEYS[2]  unlock channel       a waiting process listens on <KEYS[2]>:<its client id>; a RedLock
--                               round waits on KEYS[2] itself (its masters' holds are simple locks)
-- KEYS[3]  waiting processes    (see lock-4.lua)
-- KEYS[4]  hand-over            (see hand-over.lua)
-- ARGV[1]  token of this acquisition
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  message
-- ARGV[4]  'pass' or 'keep'     (see unlock-4.lua)
-- ARGV[5]  client id of the releasing process (see unlock-4.lua; needed with 'keep')
-- Returns  'released' (handed over if anyone waits), 'kept' (with 'keep' while other processes than the caller's wait:
--          nobody woken), 'not-owner' (held under another token: nothing changed), 'not-locked' (expired);
--          error BADARG (nothing changed) for unusable arguments
--!include hand-over.lua
if not ARGV[1] or ARGV[1] == '' then return redis.error_reply('BADARG token is empty') end
if ARGV[2] ~= 'publish' and ARGV[2] ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(ARGV[2]))
end
if ARGV[4] ~= 'pass' and ARGV[4] ~= 'keep' then
  return redis.error_reply('BADARG hand-over must be pass or keep, got ' .. tostring(ARGV[4]))
end
if ARGV[4] == 'keep' and (not ARGV[5] or ARGV[5] == '') then return redis.error_reply('BADARG client id is empty') end
-- pcall: a hash here is another lock kind's hold, not ours
local value = redis.pcall('get', KEYS[1])
if not value then
  return 'not-locked'
end
if type(value) ~= 'string' or value ~= ARGV[1] then
  return 'not-owner'
end
-- Published before the delete (subscribers hear it once the script is over either way): a user that
-- may not publish here is refused before anything changed, and keeps its hold.
redis.call(ARGV[2], KEYS[2], ARGV[3] or '')
redis.call('del', KEYS[1])
if ARGV[4] == 'keep' then
  return othersWaiting(KEYS[3], ARGV[5]) and 'kept' or 'released'
end
handOver(KEYS[3], KEYS[2], KEYS[4], ARGV[2], ARGV[3] or '')
return 'released'
