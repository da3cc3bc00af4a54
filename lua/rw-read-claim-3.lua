#!lua flags=allow-oom
-- Read-write lock, read side: settle an attempt whose reply never came: if
-- it landed and its hold is live, the hold is the caller's (claimed); if it did not land, it is
-- cancelled, so that a copy of it still on its way takes nothing when it comes.
-- KEYS[1]  readers              (see rw-read-lock-6.lua)
-- KEYS[2]  read hold counts
-- KEYS[3]  read hold ids        (see rw-readers.lua)
-- ARGV[1]  hold id              the unanswered attempt's id
-- ARGV[2]  owner id
-- Returns  {'granted', token}    it landed as a first read hold and is still live: the caller's now
--          {'reentered', token}  it landed as a re-entry and is still live
--          {'cancelled'}         it did not land (now it never will), or its hold ended already
--          error BADARG before any write when an argument is unusable
--!include server-time.lua
--!include rw-readers.lua
local readers, counts, grants = KEYS[1], KEYS[2], KEYS[3]
local holdId, badId = holdIdArgument(ARGV[1], 'hold id')
if badId then return badId end
local owner = ARGV[2]
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local now = nowMs()
pruneReaders(readers, counts, grants, now)
local kind, token, holder = readHold(grants, holdId)
if (kind == 'g' or kind == 'e') and holder == owner and redis.call('hexists', counts, owner) == 1 then
  return {kind == 'g' and 'granted' or 'reentered', token}
end
if not kind then
  endHold(grants, holdId, 'x')
  touchReaders(readers, counts, grants, now)
end
return {'cancelled'}
