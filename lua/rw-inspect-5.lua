#!lua flags=no-writes
-- Read-only snapshot of one read-write lock, for the lock board: the write hold, the live read holds,
-- the waiting writers and the fencing counter. Lists are cut at ARGV[1] entries, so a lock with many
-- readers costs a bounded reply; the totals say how many there are.
-- KEYS[1]  write hold         hash owner -> hold count, with the write lease (see rw-write-lock-7.lua)
-- KEYS[2]  readers            zset owner -> expiry (server ms)
-- KEYS[3]  read hold counts   hash owner -> hold count
-- KEYS[4]  writer intents     zset owner -> deadline (server ms)
-- KEYS[5]  fencing counter
-- ARGV[1]  most entries listed per list, a whole number >= 1
-- Returns  {write pttl, write holders (flat owner, count pairs), live readers (flat owner, count, ms
--          left triples), live readers in all, waiting writers (flat owner, ms left pairs), waiting
--          writers in all, fence or false}
--!include server-time.lua
local writeKey, readersKey, countsKey, writersKey, fenceKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local most = tonumber(ARGV[1])
if not most or most < 1 or most % 1 ~= 0 then
  return redis.error_reply('BADARG most must be a whole number >= 1, got ' .. tostring(ARGV[1]))
end
local now = nowMs()
local after = '(' .. now
local readers = {}
local live = redis.call('zrangebyscore', readersKey, after, '+inf', 'withscores', 'limit', 0, most)
for i = 1, #live, 2 do
  table.insert(readers, live[i])
  table.insert(readers, tonumber(redis.call('hget', countsKey, live[i])) or 1)
  table.insert(readers, tonumber(live[i + 1]) - now)
end
local writers = {}
local intents = redis.call('zrangebyscore', writersKey, after, '+inf', 'withscores', 'limit', 0, most)
for i = 1, #intents, 2 do
  table.insert(writers, intents[i])
  table.insert(writers, tonumber(intents[i + 1]) - now)
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
