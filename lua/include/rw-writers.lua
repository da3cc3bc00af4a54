-- Writer intents of a read-write lock: a sorted set `writers` (waiting writer's owner id -> deadline,
-- Redis server time in ms). While a live intent is there, readers that hold nothing yet queue behind
-- it, so a stream of readers cannot starve a writer. A waiting writer refreshes its deadline with
-- every attempt; one that stops (its process died) is dropped once the deadline passes.

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
