#!lua flags=no-writes
-- Any lock kind: one read of its holds, on the master (read only). A Cluster client with `scaleReads`
-- sends a plain GET or HGET to a replica, which may lag, or after a failover still show a hold the
-- new master lost; a script call always goes to the master. So the engine reads through this when it
-- decides something (was an attempt whose reply never came granted?) or when a caller must see its
-- own writes (isLocked right after lock).
-- KEYS[1]  lock                 the key that records the holds: a hash owner -> hold count (reentrant and
--                               fair locks, a read-write lock's read counts), a string (a simple lock's
--                               token) or a sorted set member -> deadline (a semaphore's holds)
-- KEYS[2]  fence                the fencing counter of the same name
-- ARGV[1]  holder               the owner, token or member to read; '' reads no hold
-- ARGV[2]  kind                 'hash', 'string' or 'zset': what KEYS[1] is when the caller's kind holds it
-- Returns  {pttl, hold, fence}  pttl: PTTL of KEYS[1] (-2: no key); hold: the holder's hold count (hash),
--                               the token that holds the lock (string) or the hold's deadline (zset),
--                               false when there is none or KEYS[1] is another kind's; fence: the
--                               counter, false when no token was ever taken
--          error BADARG when kind is none of the three
local holder, kind = ARGV[1], ARGV[2]
if kind ~= 'hash' and kind ~= 'string' and kind ~= 'zset' then
  return redis.error_reply('BADARG kind must be hash, string or zset, got ' .. tostring(kind))
end
local hold = false
if holder ~= '' and redis.call('type', KEYS[1]).ok == kind then
  if kind == 'hash' then
    hold = redis.call('hget', KEYS[1], holder)
  elseif kind == 'string' then
    hold = redis.call('get', KEYS[1])
  else
    hold = redis.call('zscore', KEYS[1], holder)
  end
end
return {redis.call('pttl', KEYS[1]), hold, redis.call('get', KEYS[2])}
