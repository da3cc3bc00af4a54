#!lua flags=allow-oom
-- Simple lock: compare-and-delete, then hand the lock over to one waiting process. A hold's value is
-- its token: '<id>:<owner id>', the id being 36 characters of the acquisition's own. A release names
-- the hold it ends: its whole token, or its owner (a release by owner, from any process), compared
-- whole: never parsed, never a prefix. A release runs once (see release-once.lua): a repeat of one
-- that landed replies 'released' and touches nothing. A release of a token the lock does not hold
-- cancels that token: no copy of its attempt may take the lock after it.
-- KEYS[1]  lock string
-- KEYS[2]  unlock channel       a waiting process listens on <KEYS[2]>:<its client id> (a RedLock
--                               round's too, see redlock-release-3.lua)
-- KEYS[3]  waiting processes    (see lock-5.lua)
-- KEYS[4]  hand-over            (see hand-over.lua)
-- KEYS[5]  recent releases      <prefix>:{<name>}:releases (see release-once.lua)
-- ARGV[1]  token                the hold's whole token, or '' for a release by owner (ARGV[2])
-- ARGV[2]  owner id             '' with a token; else the hold whose token names exactly this owner
-- ARGV[3]  call id              '' with a token; else the release by owner's own id, the same on a repeat
-- ARGV[4]  publish command      'publish' or 'spublish'
-- ARGV[5]  message
-- ARGV[6]  'pass' or 'keep'     (see unlock-6.lua)
-- ARGV[7]  client id of the releasing process (see unlock-6.lua; needed with 'keep')
-- ARGV[8]  turn ms              with 'keep': how long the releasing process's turn may still last (see unlock-6.lua)
-- Returns  'released' (handed over if anyone waits; also a repeat of a release that landed: nothing
--          changed), 'kept' (with 'keep' while other processes than the caller's wait: reserved for the
--          caller's turn),
--          'not-owner' (held under another token or by another owner: the lock untouched), 'not-locked'
--          (expired; with a token, either leaves it cancelled); error BADARG (nothing changed) for
--          unusable arguments
--!include hand-over-args.lua
--!include publish-command.lua
--!include release-once.lua
local ID_LENGTH = 36

local token, owner, callId = ARGV[1], ARGV[2], ARGV[3]
local publish, message, mode, client = ARGV[4], ARGV[5] or '', ARGV[6], ARGV[7]
if token == nil or owner == nil or callId == nil then
  return redis.error_reply('BADARG expected a token, an owner id and a call id, got ' .. #ARGV .. ' arguments')
end
if (token == '') == (owner == '') then
  return redis.error_reply('BADARG give either a token or an owner id')
end
if owner ~= '' and callId == '' then return redis.error_reply('BADARG call id is empty') end
local badPublish = publishCommandProblem(publish)
if badPublish then return badPublish end
local turnMs, badHandOver = handOverArguments(mode, client, ARGV[8])
if badHandOver then return badHandOver end

-- Whether `value` is a hold of exactly `owner`: the id, ':', then the owner, all of it.
local function heldBy(value, owner)
  return #value == ID_LENGTH + 1 + #owner
    and string.byte(value, ID_LENGTH + 1) == 58 -- ':'
    and string.sub(value, ID_LENGTH + 2) == owner
end

local releaseId = token ~= '' and token or callId
-- A repeat of a release by owner is known before the lock is looked at: the owner may hold it again.
if owner ~= '' and landedBefore(KEYS[5], releaseId) then return 'released' end
-- pcall: a hash here is another lock kind's hold, not ours
local value = redis.pcall('get', KEYS[1])
-- A release by owner that ended nothing is remembered as '!<call id>', so that a copy of it sent
-- after the owner took the lock again ends nothing either.
local endedNothing = '!' .. callId
local ours = type(value) == 'string' and (value == token or (owner ~= '' and heldBy(value, owner)))
if ours and owner ~= '' and landedBefore(KEYS[5], endedNothing) then ours = false end
if not ours then
  if token ~= '' then
    -- A token is never granted twice: its release can be looked for once the lock is not its own.
    if landedBefore(KEYS[5], releaseId) then return 'released' end
    -- Its hold ended (or its attempt never landed): a copy of the attempt still on its way takes nothing.
    cancelToken(KEYS[5], token)
  elseif not landedBefore(KEYS[5], endedNothing) then
    rememberRelease(KEYS[5], endedNothing)
  end
  return value and 'not-owner' or 'not-locked'
end
-- Published before the delete (subscribers hear it once the script is over either way): a user that
-- may not publish here is refused before anything changed, and keeps its hold.
redis.call(publish, KEYS[2], message)
redis.call('del', KEYS[1])
rememberRelease(KEYS[5], releaseId)
-- Released by owner: the hold's own token is cancelled, so that a late copy of its attempt takes
-- nothing (and its holder's own release of it still learns the hold was not its own any more).
if releaseId ~= value then cancelToken(KEYS[5], value) end
-- No process waits and the lock is not reserved (the uncontended case): nothing to hand over, no turn
-- to keep or end.
if redis.call('exists', KEYS[3], KEYS[4]) == 0 then return 'released' end
-- The hand-over's steps, defined only past the uncontended case (each step a script defines costs
-- Redis something at every call).
--!include hand-over.lua
return afterRelease(mode, KEYS[3], KEYS[2], KEYS[4], publish, client, turnMs, message)
