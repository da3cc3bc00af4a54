--!include publish-command.lua
-- The holds of one semaphore: a sorted set, member '<permits>:<hold id>' (the number of permits the
-- hold has, then an id unique to the acquisition), score = the Redis server time (ms) its lease ends.
-- Every script reads the time from Redis (server-time.lua, included before this file), never from a
-- client, so clients' clocks may drift apart.

local function permitsOf(member)
  return tonumber(string.match(member, '^(%d+):')) or 0
end

-- Permits held by live holds (after reclaimAndCount: all holds). O(holds), and holds <= limit.
local function permitsInUse(holdsKey, now)
  local used = 0
  for _, member in ipairs(redis.call('zrangebyscore', holdsKey, '(' .. now, '+inf')) do
    used = used + permitsOf(member)
  end
  return used
end

-- Drops the holds whose lease ended (a crashed or frozen holder's), in the same read of the holds
-- that counts the live ones: returns how many permits came back, then how many live holds have.
local function reclaimAndCount(holdsKey, now)
  local all = redis.call('zrange', holdsKey, 0, -1, 'withscores')
  local freed, used, expired = 0, 0, false
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) <= now then
      expired = true
      freed = freed + permitsOf(all[i])
    else
      used = used + permitsOf(all[i])
    end
  end
  if expired then redis.call('zremrangebyscore', holdsKey, '-inf', now) end
  return freed, used
end

-- Reclaims the holds whose lease ended; returns the permits free under `limit` (negative while more
-- are held than a shrunk limit allows) and how many the reclaim gave back.
local function freePermits(holdsKey, limit, now)
  local freed, used = reclaimAndCount(holdsKey, now)
  return limit - used, freed
end

-- The limit set at run time (setPermits) if any, else the one the caller was configured with; then
-- whether one is stored (none: keepFence on that key has nothing to keep, see semaphore-queue.lua).
local function currentLimit(limitKey, configured)
  local stored = tonumber(redis.call('get', limitKey))
  return stored or configured, stored ~= nil
end

local function wholeNumber(value, min, max)
  return value and value >= min and value <= max and value % 1 == 0
end

-- The BADARG reply for a limit (`raw`, as given) that is not a whole number in 1..2147483647, or for
-- a publish command the script cannot use; nil when both are usable.
local function limitAndPublishProblem(raw, publish)
  if not wholeNumber(tonumber(raw), 1, 2147483647) then
    return redis.error_reply('BADARG limit must be a whole number in 1..2147483647, got ' .. tostring(raw))
  end
  return publishCommandProblem(publish)
end
