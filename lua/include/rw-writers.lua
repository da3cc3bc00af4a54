-- Writer intents of a read-write lock: a sorted set `writers` (intent -> deadline, Redis server time
-- in ms). While a live intent is there, readers that hold nothing yet queue behind it, so a stream of
-- readers cannot starve a writer. A waiting writer refreshes its deadline with every attempt; one that
-- stops (its process died) is dropped once the deadline passes.
-- An intent is '<owner id>\0<wait id>': one per wait (a lock() or tryLock() call), never per owner, so
-- that a late copy of an abandon or a grant of one wait leaves another wait of the same owner waiting.
-- Owner ids hold no NUL, so the first NUL ends the owner; the owner is never parsed further.

-- The BADARG reply for an owner id (empty, or holding NUL) or a wait id (empty) the scripts refuse, or nil.
local function intentArgumentProblem(owner, waitId)
  if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
  if string.find(owner, '\0', 1, true) then return redis.error_reply('BADARG owner id holds a NUL character') end
  if not waitId or waitId == '' then return redis.error_reply('BADARG wait id is empty') end
  return nil
end

-- The intent of `owner`'s wait `waitId`.
local function writerIntent(owner, waitId)
  return owner .. '\0' .. waitId
end

-- The owner of an intent.
local function intentOwner(intent)
  local cut = string.find(intent, '\0', 1, true)
  return cut and string.sub(intent, 1, cut - 1) or intent
end

-- Drops lapsed intents; returns the earliest deadline still standing, or nil when none is.
local function liveIntent(writers, now)
  redis.call('zremrangebyscore', writers, '-inf', now)
  local first = redis.call('zrange', writers, 0, 0, 'withscores')
  return first[2] and tonumber(first[2]) or nil
end

-- The key lives as long as its last deadline (deleted when empty).
local function touchWriters(writers, now)
  local last = redis.call('zrange', writers, -1, -1, 'withscores')
  local ttl = last[2] and (tonumber(last[2]) - now) or 0
  if ttl < 1 then
    redis.call('del', writers)
  else
    redis.call('pexpire', writers, ttl)
  end
end
