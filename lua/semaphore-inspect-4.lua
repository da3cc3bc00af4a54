#!lua flags=no-writes
-- Read-only snapshot of one semaphore, for the lock board: its live holds with their expiries, the
-- permits they hold, the run-time limit, the fencing counter and the waiting processes. Lists are cut
-- at ARGV[1] entries (soonest expiry first; longest waiting first); the totals say how many there are.
-- KEYS[1]  holds              zset '<permits>:<hold id>' -> Redis server time (ms) its lease ends
-- KEYS[2]  run-time limit     set by setPermits; absent: each client's configured limit applies
-- KEYS[3]  fencing counter
-- KEYS[4]  waiting            the queue of waiting acquisitions (see include/semaphore-queue.lua)
-- ARGV[1]  most entries listed per list, a whole number >= 1
-- Returns  {run-time limit or false, permits held, holds (flat member, ms left pairs), live holds in
--          all, fence or false, the waiting acquisitions' client ids (longest waiting first), waiting in all}
--!include live-entries.lua
--!include semaphore-holds.lua
local holdsKey, limitKey, fenceKey, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local most, badArg = mostArg(ARGV[1])
if not most then return badArg end
local now = nowMs()
local after = '(' .. now
local holds = liveEntries(holdsKey, now, most)
local clients = {}
for _, entry in ipairs(redis.call('zrange', waitingKey, 0, most - 1)) do
  local length, rest = string.match(entry, '^(%d+):(.*)$')
  table.insert(clients, length and string.sub(rest, 1, tonumber(length)) or entry)
end
return {
  redis.call('get', limitKey) or false,
  permitsInUse(holdsKey, now),
  holds,
  redis.call('zcount', holdsKey, after, '+inf'),
  redis.call('get', fenceKey) or false,
  clients,
  redis.call('zcard', waitingKey),
}
