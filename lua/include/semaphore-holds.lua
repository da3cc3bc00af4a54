--!include publish-command.lua
-- The holds of one semaphore: a sorted set, member '<permits>:<hold id>' (the number of permits the
-- hold has, then an id unique to the acquisition), score = the Redis server time (ms) its lease ends.
-- Every script reads the time from Redis (server-time.lua, included before this file), never from a
-- client, so clients' clocks may drift apart.

local function permitsOf(member)
  return tonumber(string.match(member, '^(%d+):')) or 0
end

-- Drops the holds whose lease ended (a crashed or frozen holder's); returns how many permits came back.
local function reclaimExpired(holdsKey, now)
  local expired = redis.call('zrangebyscore', holdsKey, '-inf', now)
  if #expired == 0 then return 0 end
  redis.call('zremrangebyscore', holdsKey, '-inf', now)
  local freed = 0
  for _, member in ipairs(expired) do freed = freed + permitsOf(member) end
  return freed
end

-- Permits held by live holds (after reclaimExpired: all holds). O(holds), and holds <= limit.
local function permitsInUse(holdsKey, now)
  local used = 0
  for _, member in ipairs(redis.call('zrangebyscore', holdsKey, '(' .. now, '+inf')) do
    used = used + permitsOf(member)
  end
  return used
end

-- Reclaims the holds whose lease ended; returns the permits free under `limit` (negative while more
-- are held than a shrunk limit allows) and how many the reclaim gave back.
local function freePermits(holdsKey, limit, now)
  local freed = reclaimExpired(holdsKey, now)
  return limit - permitsInUse(holdsKey, now), freed
end

-- The limit set at run time (setPermits) if any, else the one the caller was configured with.
local function currentLimit(limitKey, configured)
  return tonumber(redis.call('get', limitKey)) or configured
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
