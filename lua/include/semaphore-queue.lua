--!include server-time.lua
--!include semaphore-holds.lua
--!include fencing.lua
-- The queue of one semaphore's waiting acquisitions, and the hand-over of free permits to them.
-- An entry is one acquisition: '<length of client id>:<client id><hold member>', so that any client id
-- and any hold member (whose owner part is the application's text) read back exactly. Two sorted sets
-- hold it: `waiting` (entry -> time it registered, µs: FIFO order) and `deadlines` (entry -> Redis
-- server time, ms, after which it counts as dead: its waiter refreshes it with every refused attempt).
-- Permits coming free are handed to the longest-waiting live acquisitions that fit: the releasing
-- script records the hold itself (the member, with a short acceptance lease) and tells the waiter on
-- its client's channel '<channel prefix>:<client id>' with '<hold member>|<server ms>:<fencing token>'.
-- The waiter holds from that message on; its own renewal replaces the acceptance lease, and a waiter
-- that cannot (frozen, cut off) costs the others only that lease.
-- `q` holds the keys and settings of one call: holds, limit, fence, channel (prefix), waiting, deadlines,
-- publish, acceptance (ms), idle (how long the fencing counter outlives a lease), now (server ms), nowUs
-- (the same reading in µs, see serverNow), limitStored (false when the call read the limit key and
-- found none: a hand-over then has no stored limit to keep), and self: the entry of the calling
-- acquisition, if it may be queued (it takes its permits itself).

-- The entry of the acquisition `member` of client `client`.
local function queueEntry(client, member)
  return #client .. ':' .. client .. member
end

-- The client id and the hold member of an entry; nil for an entry of no known shape.
local function entryParts(entry)
  local length, rest = string.match(entry, '^(%d+):(.*)$')
  length = tonumber(length)
  if not length or length < 1 or #rest <= length then return nil end
  return string.sub(rest, 1, length), string.sub(rest, length + 1)
end

-- Takes `entry` out of the queue; true when it was queued.
local function leaveQueue(q, entry)
  if redis.call('zrem', q.deadlines, entry) == 0 then return false end
  redis.call('zrem', q.waiting, entry)
  return true
end

-- A refused waiter joins the back of the queue, or keeps its place; either way it is alive for `staleMs` more.
local function joinQueue(q, entry, staleMs)
  local nowUs = q.nowUs
  if not nowUs then
    local time = redis.call('time')
    nowUs = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  redis.call('zadd', q.waiting, 'nx', nowUs, entry)
  redis.call('zadd', q.deadlines, q.now + staleMs, entry)
  keepAtLeast(q.waiting, staleMs)
  keepAtLeast(q.deadlines, staleMs)
end

-- Records `member`'s hold with the acceptance lease and tells its client; false (nothing recorded)
-- when nobody listens on that client's channel (its process died, or its subscriber is reconnecting):
-- it could not use it now.
local function handTo(q, client, member)
  local token = nextToken(q.fence, q.acceptance + q.idle)
  local told = redis.call(q.publish, q.channel .. ':' .. client, member .. '|' .. q.now .. ':' .. tokenText(token))
  if told == 0 then return false end
  redis.call('zadd', q.holds, q.now + q.acceptance, member)
  keepAtLeast(q.holds, q.acceptance)
  -- The limit setPermits stored outlives this hold as it does every other: expired under it, the
  -- configured one would count its permits against a larger limit. (None stored: nothing to keep.)
  if q.limitStored ~= false then keepFence(q.limit, q.acceptance + q.idle) end
  return true
end

-- Hands `available` free permits to the longest-waiting live acquisitions that fit, dropping the dead
-- (past their deadline), the malformed and any already holding (its own attempt was granted). One that
-- wants more than is free keeps its place and lets smaller ones behind it in; so does one nobody listens
-- for now (its subscriber is reconnecting, or its process died), for an acceptance lease: it is next if
-- it hears again and refreshes its place by then. Stops at the caller's own entry (q.self): the caller
-- is the next in line. Returns the permits still free.
local function handOverFree(q, available)
  if available <= 0 then return available end
  -- Read a few at a time: a hand-over most often goes to the first entries. `kept` entries stay ahead.
  local kept = 0
  while true do
    local batch = redis.call('zrange', q.waiting, kept, kept + 15)
    for _, entry in ipairs(batch) do
      if entry == q.self then return available end
      local client, member = entryParts(entry)
      local permits = member and permitsOf(member) or 0
      local deadline = tonumber(redis.call('zscore', q.deadlines, entry))
      if permits < 1 or not deadline or deadline <= q.now then
        leaveQueue(q, entry)
      elseif permits > available then
        kept = kept + 1
      elseif redis.call('zscore', q.holds, member) then
        leaveQueue(q, entry)
      elseif handTo(q, client, member) then
        leaveQueue(q, entry)
        available = available - permits
        if available <= 0 then return available end
      else
        -- Nobody hears it: it keeps its place for one acceptance lease at most (a reconnecting
        -- subscriber's waiter refreshes it when it tries again), so that a dead process's waiters are
        -- not told at every hand-over until their deadlines.
        redis.call('zadd', q.deadlines, 'lt', q.now + q.acceptance, entry)
        kept = kept + 1
      end
    end
    if #batch < 16 then return available end
  end
end

--!include acceptance-lease.lua
