-- Hand-over of a contended reentrant or simple lock between processes (see lib/engine/turns/process-turns.ts).
-- A process that holds a contended lock keeps re-acquiring it, or handing it to its own waiters, for a
-- short turn; then its release passes the lock on. The free lock may be reserved (`next` key) in two
-- ways, its value naming the kind and the client it is for:
--   'pass:<client>'  a release passed the lock on: it woke the longest-waiting process and reserved the
--                    free lock for it, so that the passer's own next attempt, sent at once while the woken
--                    process is still waking, cannot take it back. Used up by that process's grant; lapses
--                    by itself after HAND_OVER_MS, so a woken process that never comes (frozen, or gone
--                    between its wake-up and its attempt) holds the lock back for this long at most.
--   'turn:<client>'  a release inside <client>'s turn kept the lock in its process while others wait
--                    (keepTurn): the free lock stays <client>'s until the turn's end, whatever its grants
--                    in between, and the next process in line was told when that is. A stall of <client>
--                    (nothing in that process runs, not even the pass it would make when its turn ends)
--                    therefore holds the others back until the turn's end in Redis time, and no longer.
--!include wake-one-process.lua
--!include hand-over-args.lua
local HAND_OVER_MS = 50

-- The free lock's reservation: its kind ('pass' or 'turn'), the client it is for and its remaining ms;
-- nil when there is none. A value of another form (an older script's) counts as a hand-over to
-- another client.
local function readReservation(nextKey)
  local value = redis.call('get', nextKey)
  if not value then return nil end
  local ttl = redis.call('pttl', nextKey)
  if ttl <= 0 then return nil end
  local kind, client = string.match(value, '^(%l+):(.*)$')
  if kind ~= 'pass' and kind ~= 'turn' then kind, client = 'pass', '' end
  return kind, client, ttl
end

-- When the free lock is reserved for another process than `client`: the reservation's remaining ms
-- (what a refused caller waits at most). Otherwise nil, and `mine` tells how it is reserved for
-- `client`: 'pass' (used up by its grant), 'turn' (kept through the turn) or false.
local function reservation(nextKey, client)
  local kind, reservedFor, ttl = readReservation(nextKey)
  if not kind then return nil, false end
  if reservedFor == client then return nil, kind end
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
    redis.call('set', nextKey, 'pass:' .. woken, 'px', HAND_OVER_MS)
  else
    redis.call('del', nextKey)
  end
  return woken
end

-- The message that tells a waiting process to try the lock in `ms` milliseconds (when a turn's
-- reservation ends), not at once (see lib/engine/waiting/waiters.ts).
local function tryAfterMessage(ms)
  return 'after:' .. ms
end

-- A release in `client`'s turn left the lock free while other processes wait ('kept'): the free lock is
-- reserved for `client` until its turn ends, `turnMs` from now, and the longest-waiting other process is
-- told to try then. Once per turn: a later release of the same turn finds the reservation and changes
-- nothing. So whatever `client` does next (takes the lock again, passes it, or stalls), the others
-- can take the lock at the latest when the reservation ends.
local function keepTurn(waitingKey, channelPrefix, nextKey, publish, client, turnMs)
  if redis.call('get', nextKey) == 'turn:' .. client then return end
  redis.call('set', nextKey, 'turn:' .. client, 'px', turnMs)
  wakeOneProcess(waitingKey, channelPrefix, publish, tryAfterMessage(turnMs), client)
end

-- A release in `client`'s turn found no other process waiting: the turn is over, and so is its reservation.
local function endTurn(nextKey, client)
  if redis.call('get', nextKey) == 'turn:' .. client then redis.call('del', nextKey) end
end


-- What a release that freed the lock does next, by its hand-over `mode`: in its process's turn while
-- other processes wait, it keeps the lock for the turn ('kept'); with none waiting the turn is over;
-- otherwise the lock is passed to the process that waited longest. Returns the release's reply.
local function afterRelease(mode, waitingKey, channelPrefix, nextKey, publish, client, turnMs, message)
  if mode == 'keep' then
    if othersWaiting(waitingKey, client) then
      keepTurn(waitingKey, channelPrefix, nextKey, publish, client, turnMs)
      return 'kept'
    end
    endTurn(nextKey, client)
    return 'released'
  end
  handOver(waitingKey, channelPrefix, nextKey, publish, message)
  return 'released'
end
