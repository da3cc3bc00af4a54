#!lua flags=no-writes
-- Read-only snapshot of one lock, for inspection (who holds it, since when it runs out, who waits).
-- KEYS[1]  lock             hash owner -> hold count (reentrant, fair; 0 = handed over, not yet
--                           accepted) or string token (simple lock)
-- KEYS[2]  fencing counter
-- KEYS[3]  fair queue       list of waiter ids, head first
-- KEYS[4]  fair deadlines   zset waiter id -> Redis server time (ms) after which it counts as dead
-- KEYS[5]  waiting          zset client id -> time it registered (µs) (reentrant and simple locks)
-- Returns  {type, pttl, holders (flat owner, count pairs), fence or false, queue (flat id, ms left
--          pairs), waiting client ids}; type is 'hash', 'string' or 'none'
--!include server-time.lua
local lockKey, fenceKey, queueKey, deadlineKey, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = nowMs()
local kind = redis.call('type', lockKey)['ok']
local holders = {}
if kind == 'hash' then
  holders = redis.call('hgetall', lockKey)
elseif kind == 'string' then
  holders = {redis.call('get', lockKey), '1'}
end
local queue = {}
for _, id in ipairs(redis.call('lrange', queueKey, 0, -1)) do
  local deadline = tonumber(redis.call('zscore', deadlineKey, id))
  table.insert(queue, id)
  table.insert(queue, deadline and (deadline - now) or -1)
end
local fence = redis.call('get', fenceKey)
return {kind, redis.call('pttl', lockKey), holders, fence or false, queue, redis.call('zrange', waitingKey, 0, -1)}
