#!lua flags=no-writes
-- Read-only snapshot of one read-write lock, for the lock board: the write hold, the live read holds,
-- the waiting writers and the fencing counter. Lists are cut at ARGV[1] entries, so a lock with many
-- readers costs a bounded reply; the totals say how many there are.
-- KEYS[1]  write hold         hash owner -> hold count, with the write lease (see rw-write-lock-7.lua)
-- KEYS[2]  readers            zset owner -> expiry (server ms)
-- KEYS[3]  read hold counts   hash owner -> hold count
-- KEYS[4]  writer intents     zset '<owner id>\0<wait id>' -> deadline (server ms), see rw-writers.lua
-- KEYS[5]  fencing counter
-- ARGV[1]  most entries listed per list, a whole number >= 1
-- Returns  {write pttl, write holders (flat owner, count pairs), live readers (flat owner, count, ms
--          left triples), live readers in all, waiting writers (flat owner, ms left pairs), waiting
--          writers in all, fence or false}
--!include live-entries.lua
--!include rw-writers.lua
local writeKey, readersKey, countsKey, writersKey, fenceKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local most, badArg = mostArg(ARGV[1])
if not most then return badArg end
local now = nowMs()
local after = '(' .. now
local readers = liveEntries(readersKey, now, most, function(owner)
  return tonumber(redis.call('hget', countsKey, owner)) or 1
end)
local writers = liveEntries(writersKey, now, most)
for i = 1, #writers, 2 do
  writers[i] = intentOwner(writers[i])
end
return {
  redis.call('pttl', writeKey),
  redis.call('hgetall', writeKey),
  readers,
  redis.call('zcount', readersKey, after, '+inf'),
  writers,
  redis.call('zcount', writersKey, after, '+inf'),
  redis.call('get', fenceKey) or false,
}
