-- Hand-over of a contended reentrant or simple lock between processes (see lib/engine/process-turns.ts).
-- A process that holds a contended lock keeps re-acquiring it, or handing it to its own waiters, for a
-- short turn; then its release passes the lock on: it wakes the longest-waiting process and reserves
-- the free lock for it, so that the passer's own next attempt, sent at once while the woken process is
-- still waking, cannot take it back. The reservation lapses by itself, so a woken process that never
-- comes (frozen, or gone between its wake-up and its attempt) holds the lock back for this long at most.
--!include wake-one-process.lua
local HAND_OVER_MS = 50

-- When the free lock is reserved for another process than `client`: the reservation's remaining ms
-- (what a refused caller waits at most). Otherwise nil, and `mine` tells whether it was reserved for
-- `client` (the reservation is then used up by its grant).
local function reservation(nextKey, client)
  local reserved = redis.call('get', nextKey)
  if not reserved then return nil, false end
  if reserved == client then return nil, true end
  local ttl = redis.call('pttl', nextKey)
  if ttl <= 0 then return nil, false end
  return ttl, false
end

-- Whether a process other than `client` is registered as waiting: a release in `client`'s turn keeps
-- the lock from the other processes only then ('kept'). A process whose only rivals are its own waiters
-- has no turn to keep: its release lands as a plain one.
local function othersWaiting(waitingKey, client)
  local count = redis.call('zcard', waitingKey)
  if count == 0 then return false end
  if count > 1 then return true end
  return not redis.call('zscore', waitingKey, client)
end

-- Passes the free lock on: wakes one waiting process and reserves the lock for it.
-- Returns the client id woken, or false when no registered process listens.
local function handOver(waitingKey, channelPrefix, nextKey, publish, message)
  local woken = wakeOneProcess(waitingKey, channelPrefix, publish, message)
  if woken then
    redis.call('set', nextKey, woken, 'px', HAND_OVER_MS)
  else
    redis.call('del', nextKey)
  end
  return woken
end
