#!lua flags=no-writes
-- Read-only snapshot of one lock, for inspection (who holds it, since when it runs out, who waits).
-- KEYS[1]  lock             hash owner -> hold count (reentrant, fair; 0 = handed over, not yet
--                           accepted) or string token (simple lock)
-- KEYS[2]  fencing counter
-- KEYS[3]  fair queue       list of wait entries '<owner id>\0<waiter id>', head first (see fair-queue.lua)
-- KEYS[4]  fair deadlines   zset entry -> Redis server time (ms) after which it counts as dead
-- KEYS[5]  waiting          zset client id -> time it registered (µs) (reentrant and simple locks)
-- Returns  {type, pttl, holders (flat owner, count, waiter id triples: the wait a fair lock is handed
--          to, while not accepted yet; else ''), fence or false, queue (flat waiter id, owner, ms left
--          triples), waiting client ids}; type is 'hash', 'string' or 'none'
--!include fair-queue.lua
local lockKey, fenceKey, queueKey, deadlineKey, waitingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = nowMs()
local kind = redis.call('type', lockKey)['ok']
local holders = {}
if kind == 'hash' then
  local handedOwner, handedWaiter = nil, nil
  local handed = redis.call('hget', lockKey, GRANTED_TO)
  if handed then handedOwner, handedWaiter = entryParts(handed) end
  local fields = redis.call('hgetall', lockKey)
  for i = 1, #fields, 2 do
    local owner = fields[i]
    -- Fields starting with NUL are the fair lock's own (GRANTED_TO, HANDED_HOLD), never an owner.
    if string.byte(owner, 1) ~= 0 then
      table.insert(holders, owner)
      table.insert(holders, fields[i + 1])
      table.insert(holders, (owner == handedOwner and fields[i + 1] == '0' and handedWaiter) or '')
    end
  end
elseif kind == 'string' then
  holders = {redis.call('get', lockKey), '1', ''}
end
local queue = {}
for _, entry in ipairs(redis.call('lrange', queueKey, 0, -1)) do
  local deadline = tonumber(redis.call('zscore', deadlineKey, entry))
  local owner, waiterId = entryParts(entry)
  table.insert(queue, waiterId or entry)
  table.insert(queue, owner or '')
  table.insert(queue, deadline and (deadline - now) or -1)
end
local fence = redis.call('get', fenceKey)
return {kind, redis.call('pttl', lockKey), holders, fence or false, queue, redis.call('zrange', waitingKey, 0, -1)}
