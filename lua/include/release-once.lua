-- A simple lock's release lands once, and every repeat of it says so. A release runs again when an
-- application's ioredis client sends it on its new connection after the old one died before the reply
-- came, or when the library sends it again through an outage; by then the hold is gone, and the lock
-- may be another's. Each release has an id (the hold's token, or the call id of a release by owner):
-- once the release lands, the id is remembered under the lock's hash tag, and a repeat that finds it
-- there replies 'released' and touches nothing. An attempt's copy is refused when its token is
-- remembered: released (also by owner: the hold's token is remembered with the call's id), or
-- cancelled (a release of the token that found the lock not its own, sent by the library for an
-- attempt whose reply never came, or after the hold was lost: the token must never be granted after).
-- The record is a sorted set, id -> Redis time (µs) it was remembered, so that a lookup costs the
-- same however many it holds (an attempt looks at every grant): the newest RELEASE_MEMORY ids, the
-- key living RELEASE_MEMORY_MS after the latest, far past the time a caller waits for a reply
-- (operationTimeout), and short enough to cost little on a busy server.
local RELEASE_MEMORY = 1000
local RELEASE_MEMORY_MS = 60000
-- Before a cancelled token: no release id starts with it (a token or a call id opens with a UUID).
local CANCELLED = '~'

-- Whether the release `id` landed already (recently enough to be remembered).
local function landedBefore(releases, id)
  return redis.call('zscore', releases, id) ~= false
end

-- Whether an attempt under `token` must take nothing: its hold was released, or its attempt cancelled.
local function tokenEnded(releases, token)
  return landedBefore(releases, token) or landedBefore(releases, CANCELLED .. token)
end

local function rememberRelease(releases, id)
  local time = redis.call('time')
  redis.call('zadd', releases, tonumber(time[1]) * 1000000 + tonumber(time[2]), id)
  if redis.call('zcard', releases) > RELEASE_MEMORY then
    redis.call('zremrangebyrank', releases, 0, -RELEASE_MEMORY - 1)
  end
  redis.call('pexpire', releases, RELEASE_MEMORY_MS)
end

-- A release of `token` found the lock not its own: a copy of its attempt still on its way takes nothing.
local function cancelToken(releases, token)
  rememberRelease(releases, CANCELLED .. token)
end
