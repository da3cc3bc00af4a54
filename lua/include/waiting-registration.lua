-- The waiting-process registry of a non-fair lock (see wake-one-process.lua): client id -> time it
-- registered, in microseconds. (The check of a caller's client id and waiting flag is waiting-args.lua.)
--!include waiting-args.lua
-- How long the registry outlives its last refresh: every refused attempt of a waiter refreshes it,
-- and waiters re-try at least once a second while no release wakes them.
local WAITING_REGISTRY_TTL_MS = 60000

-- Microseconds, so that registrations keep their arrival order (exact in a double until 2255).
local function nowUs()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- A refused waiter's process joins the back of the registry, or keeps the place it has (a single
-- attempt, `flag` 'once', never joins).
local function registerWaiting(waitingKey, client, flag)
  if flag == 'once' then return end
  redis.call('zadd', waitingKey, 'nx', nowUs(), client)
  redis.call('pexpire', waitingKey, WAITING_REGISTRY_TTL_MS)
end

-- A granted waiter's process leaves the registry, or, when it has other waiters for this lock,
-- goes to the back so that the other processes take their turns first. ('-': the process is not
-- registered, its waiter was never refused and it has no other; 'once': a single attempt. Nothing to do.)
local function grantedWaiting(waitingKey, client, othersWaiting)
  if othersWaiting == '-' or othersWaiting == 'once' then return end
  if othersWaiting == '1' then
    redis.call('zadd', waitingKey, 'xx', nowUs(), client)
  else
    redis.call('zrem', waitingKey, client)
  end
end
