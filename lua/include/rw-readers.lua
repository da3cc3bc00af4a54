-- The read holds of a read-write lock: a sorted set `readers` (owner -> the hold's expiry, Redis
-- server time in ms), a hash `counts` (owner -> re-entrant read holds) and the read grants `grants`
-- (each hold by id, see hold-ids.lua). Every reader has its own expiry, so a reader that died runs out
-- on its own lease while the others renew theirs.
--
-- A hold that runs out stays in `readers` until a script prunes it, and the prune ends its records in
-- `grants` ('x'): the fencing counter does not move between two read holds of one owner, so only this
-- tells a record of a hold that ran out from one of the owner's next hold, which a late release or a
-- repeat of the old one must never touch. So `readers` and `counts` live as long as the last expiry,
-- and as long as `grants` while holds are recorded there: they never expire before a prune has seen
-- every hold that ran out. (Ending records by owner takes a scan of `grants`: done only when a hold ran
-- out, never on a release or a grant.)
--!include hold-ids.lua

-- `readers` and `counts` expire with the last read hold and never before `grants` (deleted when no
-- hold is left). Call it after every change to `grants` or to an expiry.
local function touchReaders(readers, counts, grants, now)
  local last = redis.call('zrange', readers, -1, -1, 'withscores')
  local ttl = last[2] and math.max(tonumber(last[2]) - now, redis.call('pttl', grants)) or 0
  if ttl < 1 then
    redis.call('del', readers, counts)
    return
  end
  redis.call('pexpire', readers, ttl)
  redis.call('pexpire', counts, ttl)
end

-- Drops the read holds whose expiry has passed (their owners died or lost them), ending their records.
local function pruneReaders(readers, counts, grants, now)
  local expired = redis.call('zrangebyscore', readers, '-inf', now)
  if #expired == 0 then return end
  local ranOut = {}
  for _, owner in ipairs(expired) do
    redis.call('hdel', counts, owner)
    ranOut[owner] = true
  end
  redis.call('zremrangebyscore', readers, '-inf', now)
  local all = redis.call('hgetall', grants)
  for i = 1, #all, 2 do
    local value = all[i + 1]
    local kind = string.sub(value, 1, 1)
    if kind == 'g' or kind == 'e' then
      local bar = string.find(value, '|', 2, true)
      if ranOut[string.sub(value, bar + 1)] then endHold(grants, all[i], 'x') end
    end
  end
  touchReaders(readers, counts, grants, now)
end

-- Read holds still running at `now`.
local function liveReaders(readers, now)
  return redis.call('zcount', readers, '(' .. now, '+inf')
end

-- Moves `owner`'s expiry to `expiry` and keeps its records alive as long (`lease` ms from now), unless
-- its hold is gone or has already run out. Returns true if renewed. Never shortens the expiry unless
-- `exact` (extend(leaseTime) sets it): an explicit owner shared by two processes has one expiry for
-- both, and the other's hold may have a longer lease it counts on (the renewing holder believes only
-- its own, shorter or not).
local function renewReader(readers, counts, grants, owner, expiry, lease, now, exact)
  local score = redis.pcall('zscore', readers, owner)
  if type(score) ~= 'string' or tonumber(score) <= now then return false end
  redis.call('zadd', readers, exact and expiry or math.max(tonumber(score), expiry), owner)
  keepGrants(grants, lease)
  touchReaders(readers, counts, grants, now)
  return true
end
