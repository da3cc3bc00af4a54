-- The read holds of a read-write lock: a sorted set `readers` (owner -> the hold's expiry, Redis
-- server time in ms) and a hash `counts` (owner -> re-entrant read holds). Every reader has its own
-- expiry, so a reader that died runs out on its own lease while the others renew theirs; both keys
-- live as long as the last expiry, so nothing outlives the last reader.

-- Both keys expire with the last read hold (deleted when none is left).
local function touchReaders(readers, counts, now)
  local last = redis.call('zrange', readers, -1, -1, 'withscores')
  local ttl = last[2] and (tonumber(last[2]) - now) or 0
  if ttl < 1 then
    redis.call('del', readers, counts)
    return
  end
  redis.call('pexpire', readers, ttl)
  redis.call('pexpire', counts, ttl)
end

-- Drops the read holds whose expiry has passed (their owners died or lost them).
local function pruneReaders(readers, counts, now)
  local expired = redis.call('zrangebyscore', readers, '-inf', now)
  if #expired == 0 then return end
  for _, owner in ipairs(expired) do redis.call('hdel', counts, owner) end
  redis.call('zremrangebyscore', readers, '-inf', now)
end

-- Read holds still running at `now`.
local function liveReaders(readers, now)
  return redis.call('zcount', readers, '(' .. now, '+inf')
end

-- Moves `owner`'s expiry to `expiry`, unless its hold is gone or has already run out. Returns true if renewed.
local function renewReader(readers, counts, owner, expiry, now)
  local score = redis.pcall('zscore', readers, owner)
  if type(score) ~= 'string' or tonumber(score) <= now then return false end
  redis.call('zadd', readers, expiry, owner)
  touchReaders(readers, counts, now)
  return true
end
