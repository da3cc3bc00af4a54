#!lua flags=allow-oom
-- Reentrant lock: settle an attempt whose reply never came (the connection dropped, the call timed
-- out): if it landed, its hold is the caller's (claimed); if not, it is cancelled, so that a copy of it
-- still on its way (a client re-sends commands after a reconnect) takes nothing when it comes.
-- KEYS[1]  lock hash            (see lock-5.lua)
-- KEYS[2]  hold ids             (see hold-ids.lua)
-- KEYS[3]  fencing counter      the epoch of the holds that count (see hold-ids.lua)
-- ARGV[1]  hold id              the unanswered attempt's id
-- ARGV[2]  owner id
-- ARGV[3]  lease in ms          a claimed hold's lease is made at least this long: the caller counts
--                               the attempt's lease from when it sent it, and a fair lock's hand-over
--                               may have recorded its hold under this id with a shorter one (a grant in
--                               the message, see fair-queue.lua)
-- ARGV[4]  idle key TTL in ms   how long the fencing counter outlives a claimed hold's lease (see
--                               fencing.lua): it numbers the hold's epoch, so it must outlive the hold
-- Returns  {'granted', token}    it landed as a first grant and is still held: the caller's now
--          {'reentered', token}  it landed as a re-entry and is still held
--          {'cancelled'}         it did not land (now it never will), or its hold ended already
--          error BADARG before any write when an argument is unusable
--!include hold-ids.lua
--!include fencing.lua
local holdId, badId = holdIdArgument(ARGV[1], 'hold id')
if badId then return badId end
local owner, lease = ARGV[2], tonumber(ARGV[3])
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[3]))
end
local badIdle = idleTtlProblem(ARGV[4])
if badIdle then return badIdle end
local kind, token, holder = readHold(KEYS[2], holdId, epochOf(KEYS[3]))
if (kind == 'g' or kind == 'e') and holder == owner and redis.pcall('hexists', KEYS[1], owner) == 1 then
  keepAtLeast(KEYS[1], lease)
  keepGrants(KEYS[2], lease)
  keepFence(KEYS[3], lease + tonumber(ARGV[4]))
  return {kind == 'g' and 'granted' or 'reentered', token}
end
if not kind then endHold(KEYS[2], holdId, 'x') end
return {'cancelled'}
