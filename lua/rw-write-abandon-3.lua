#!lua flags=allow-oom
-- Read-write lock: a waiting writer gives up (its wait ran out, was aborted or failed). Its wait's
-- intent goes (no other wait's, even of the same owner: a late copy of this script must leave a newer
-- wait waiting), and readers it held back are woken once no writer waits or holds any more.
-- KEYS[1]  write hold           (see rw-read-lock-5.lua)
-- KEYS[2]  writer intents
-- KEYS[3]  read wake channel    every waiting reader's process listens here
-- ARGV[1]  owner id             any text without NUL; never parsed
-- ARGV[2]  publish command      'publish' or 'spublish'
-- ARGV[3]  wait id              the wait's own id, as its attempts gave it (see rw-write-lock-7.lua)
-- Returns  1 readers woken, 0 nothing to wake (another writer waits or holds, or no intent was ours);
--          error BADARG (nothing changed) for unusable arguments. Safe to send again.
--!include server-time.lua
--!include rw-writers.lua
local writeKey, writers, readChannel = KEYS[1], KEYS[2], KEYS[3]
local owner, publish, waitId = ARGV[1], ARGV[2], ARGV[3]
local badArg = intentArgumentProblem(owner, waitId)
if badArg then return badArg end
if publish ~= 'publish' and publish ~= 'spublish' then
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(publish))
end
if redis.call('zrem', writers, writerIntent(owner, waitId)) == 0 then return 0 end
local now = nowMs()
touchWriters(writers, now)
if liveIntent(writers, now) or redis.call('exists', writeKey) == 1 then return 0 end
redis.call(publish, readChannel, 'writer-gone')
return 1
