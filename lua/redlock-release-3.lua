#!lua flags=allow-oom
-- RedLock vote on one master: compare-and-delete of the hold its token names, announced to one waiting
-- process: the longest registered in the name's waiting registry that still listens on its own channel
-- (see wake-one-process.lua; RedLock waiters register when a vote refuses them, see redlock-grant-3.lua),
-- or, when no registered process listens, on the unlock channel itself. Safe to run twice: the token
-- is unique to one attempt, so a repeat (sent again after a reconnect, or by the library through an
-- outage) finds the key gone or another token's, and touches nothing; it can never end a newer grant.
-- KEYS[1]  lock string          value = the token (see redlock-grant-3.lua)
-- KEYS[2]  unlock channel       '<channel>:<client id>' is that process's own (see wake-one-process.lua)
-- KEYS[3]  waiting processes    client id -> time it registered (µs)
-- ARGV[1]  token                the hold's whole token
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  message              '' announces nothing (a vote taken back before its answer came)
-- ARGV[4]  client id of the caller's process ('' none)
-- Returns  {'released', listeners}  it was this token's: deleted, and announced unless the message is
--                                   ''; listeners = how many processes other than the caller's heard it
--                                   (0 when not announced)
--          'not-owner'  held under another token or by another kind: nothing changed
--          'not-locked' nothing there: expired, or a repeat of a release that landed
--          error BADARG (nothing changed) for unusable arguments
--!include publish-command.lua
--!include wake-one-process.lua
local token, publish, client = ARGV[1], ARGV[2], ARGV[4] or ''
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
local badPublish = publishCommandProblem(publish)
if badPublish then return badPublish end
-- pcall: a hash here is another lock kind's hold, not ours
local value = redis.pcall('get', KEYS[1])
if value ~= token then return value and 'not-owner' or 'not-locked' end
-- Announced before the delete (subscribers hear it once the script is over either way): a user that
-- may not publish here is refused before anything changed, and keeps its hold.
local message, listeners = ARGV[3] or '', 0
if message ~= '' then
  local woken = wakeOneProcess(KEYS[3], KEYS[2], publish, message)
  if woken then
    if woken ~= client then listeners = 1 end
  else
    listeners = redis.call(publish, KEYS[2], message)
  end
end
redis.call('del', KEYS[1])
return {'released', listeners}
