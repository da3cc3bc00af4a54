#!lua
-- Fair lock: acquire, take over a hand-off made to this wait, re-enter, or queue up (FIFO). Every hold
-- is recorded under the attempt's own id (see hold-ids.lua): a repeat of the attempt (sent again after
-- a lost reply) finds its record and changes nothing, and a hold of the same owner taken by another
-- call (another process's, sharing the owner) is counted as the re-entry it is.
-- KEYS[1]  lock hash            owner -> hold count; count 0 = handed over, not yet accepted; and the
--                               wait it was granted or handed to (see fair-queue.lua)
-- KEYS[2]  waiter queue         list of wait entries '<owner id>\0<waiter id>', head first
-- KEYS[3]  waiter deadlines     zset entry -> Redis server time (ms) after which the waiter counts as dead
-- KEYS[4]  fencing counter      also the epoch of the holds that count (see hold-ids.lua): every grant
--                               and hand-off takes a token, a re-entry none
-- KEYS[5]  channel prefix       a waiter is told on <KEYS[5]>:<its client id> when the lock is handed to
--                               it: '<waiter id>|<token>:<server ms>:<hold id>' (a grant in the message)
--                               or '<waiter id>|<fencing token>' (an offer to accept; see fair-queue.lua)
-- KEYS[6]  hold ids             <prefix>:{<name>}:grants   hold id -> its record (see hold-ids.lua; the
--                               reentrant lock of the same name keeps its holds there too)
-- KEYS[7]  waiter holds         queue entry -> the hold id its wait registered (see fair-queue.lua)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner id             any text without NUL; never parsed
-- ARGV[3]  stale-waiter timeout in ms (waiters refresh their deadline more often than this)
-- ARGV[4]  acceptance lease in ms (a lock handed to a waiter lives this long until accepted)
-- ARGV[5]  publish command      'publish' or 'spublish'
-- ARGV[6]  hold id              this attempt's own id: the hold it takes is recorded under it, and a
--                               repeat of the attempt finds that record; a queued wait registers it, for
--                               a hand-over to record the hold under (a grant in the message), unless
--                               ARGV[1] is shorter than the acceptance lease
-- ARGV[7]  waiter id            '<client id>:<nonce>', made by the client for this one lock() or tryLock()
--                               call: its place in the queue, and the wait a hand-off is made to
-- ARGV[8]  mode                 'wait': the caller waits if refused, so it queues; 'once': a single
--                               attempt, which never queues
-- ARGV[9]  idle key TTL in ms   how long the fencing counter outlives a lease (see fencing.lua)
-- Returns  {'granted', token}    acquired (or took over the offer made to this wait); token = its fencing token
--          {'granted', token, hold id}  the lock was handed over to this wait under the hold id it
--                                registered (the message may be late or lost): that hold is the wait's,
--                                its lease now made at least ARGV[1]
--          {'reentered', token}  re-entered (the owner holds it, whichever call asks); the wait leaves the queue
--                                (a repeat whose hold is live: the same reply as its first run; nothing
--                                changes but a lease made at least ARGV[1] long)
--          {'refused', pttl, server ms}  queued (or still queued), this attempt's id registered: wait
--                                for a message or pttl; server ms: Redis's clock when it ran (an anchor
--                                for a grant in the message, see lib/engine/util/server-clock.ts)
--          {'refused', pttl}     'once': not queued; also a repeat whose hold has ended or was
--                                cancelled (nothing changes)
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include fair-args.lua
--!include lease-text.lua
--!include exclusive-token.lua
--!include grant-record.lua
local lease, owner, staleAfter, waiterId, mode = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[7], ARGV[8]
local bad = fairArgumentProblem(ARGV[1], ARGV[4]) or publishCommandProblem(ARGV[5]) or ownerProblem(owner)
  or waiterIdProblem(waiterId) or idleTtlProblem(ARGV[9])
if bad then return bad end
local holdId, badId = holdIdArgument(ARGV[6], 'hold id')
if badId then return badId end
if not staleAfter or staleAfter < 1 or staleAfter > 2147483647 or staleAfter % 1 ~= 0 then
  return redis.error_reply('BADARG stale-waiter timeout must be whole ms in 1..2147483647, got ' .. tostring(ARGV[3]))
end
if mode ~= 'wait' and mode ~= 'once' then
  return redis.error_reply('BADARG mode must be wait or once, got ' .. tostring(mode))
end
local grants, idle = KEYS[6], tonumber(ARGV[9])
local entry = waiterEntry(owner, waiterId)
local leaseArg = leaseText(ARGV[1], lease)

-- Grants the free lock to this attempt: the only live hold of a free lock (see recordFirstGrant).
local function grantFree()
  redis.call('hset', KEYS[1], owner, '1', GRANTED_TO, entry)
  redis.call('pexpire', KEYS[1], leaseArg)
  local granted = nextExclusiveToken(KEYS[4], lease + idle)
  recordFirstGrant(grants, holdId, granted, owner, lease)
  return {'granted', granted}
end
-- No record under this id (the attempt's first copy), the lock free and nobody queued: the uncontended
-- case, granted before the queue's steps are defined (each step a script defines costs Redis something
-- at every call).
if not recordValue(grants, holdId) and redis.call('exists', KEYS[1], KEYS[2]) == 0 then return grantFree() end
--!include fair-hand-over.lua
--!include expiry.lua
local fair = {
  lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4], channel = KEYS[5],
  publish = ARGV[5], acceptanceLease = tonumber(ARGV[4]), idle = idle, grants = KEYS[6],
  holds = KEYS[7],
}

-- Queues this wait (its place, its deadline, and the hold id a hand-over records its hold under), or
-- refuses a single attempt.
local function queueUp()
  if mode == 'wait' then
    if not redis.call('zscore', fair.deadlines, entry) then
      redis.call('rpush', fair.queue, entry)
    end
    local now = fairNow(fair)
    redis.call('zadd', fair.deadlines, now + staleAfter, entry)
    -- A lease shorter than the acceptance lease is not handed over in a message: Redis would keep the
    -- lock longer than its holder asked for. Such a wait is offered the lock, and its acceptance sets it.
    if lease >= fair.acceptanceLease then registerHold(fair, entry, holdId) end
    -- The queue's keys live as long as its latest deadline at least, and no longer than that past their
    -- last waiter's: a queue whose waits all died with their processes (and whose lock nobody takes
    -- again to sweep it) expires instead of staying forever.
    keepAtLeast(fair.queue, staleAfter)
    keepAtLeast(fair.deadlines, staleAfter)
    keepAtLeast(fair.holds, staleAfter)
    return {'refused', redis.call('pttl', fair.lock), now}
  end
  return {'refused', redis.call('pttl', fair.lock)}
end

-- A record under this id: a copy of an attempt (below). (The fencing counter, the epoch of the live
-- holds, is read only when a live record needs it.)
local kind, token, holder = readHold(grants, holdId, fair.fence)
local held
if not kind then
  -- No record, and the lock or the queue exists (see above).
  dropDeadHeads(fair)
  -- pcall: a string here is a simple lock's hold (another owner): queue up behind it
  held = redis.pcall('hget', fair.lock, owner)
  if type(held) ~= 'string' then held = nil end
  -- Not this owner's: the contended case, decided before the steps of the others are defined.
  if not held then
    -- Free, with waiters queued (its holder expired without a release, or none of them heard the
    -- last hand-over): the first of them that hears it takes it; if that is this wait, or nobody ahead
    -- of it hears it now, this attempt takes it (those passed by keep their places, see handToNextWaiter).
    if redis.call('exists', fair.lock) == 0 then
      local handed = handToNextWaiter(fair, entry)
      if handed ~= true then
        if handed == entry then takeOut(fair, entry) end
        return grantFree()
      end
    end
    return queueUp()
  end
end
--!include fair-queue.lua
--!include hold-ids.lua
if (kind == 'g' or kind == 'e') and holder == owner and ownerHolds(fair.lock, owner) then
  -- A repeat of an attempt that landed: the same reply, and the lease it asked for.
  keepAtLeast(fair.lock, lease)
  keepGrants(grants, lease)
  keepFence(fair.fence, lease + fair.idle)
  return {kind == 'g' and 'granted' or 'reentered', token}
end
if kind then
  -- A copy that comes after its hold ended, or after the caller gave the attempt up: it takes nothing.
  return {'refused', math.max(0, redis.call('pttl', fair.lock))}
end
if held == '0' then
  -- Handed to a wait of this owner: that wait takes it over (its message may be late or lost); any
  -- other wait of the owner keeps its own place behind. (The epoch, the fencing counter, is read only
  -- where a hold is recorded: a refusal needs none.)
  local epoch = epochOf(fair.fence)
  if grantedTo(fair.lock) == entry then
    redis.call('hset', fair.lock, owner, '1')
    redis.call('pexpire', fair.lock, leaseArg)
    keepFence(fair.fence, lease + fair.idle)
    recordHold(grants, holdId, 'g', epoch, owner, lease, epoch)
    return {'granted', epoch}
  end
  return queueUp()
end
local epoch = epochOf(fair.fence)
-- Handed over to this very wait (a grant in the message, which may be late or lost): the hold the
-- hand-over recorded under the id this wait registered is this attempt's answer, with its lease.
local handed = grantedTo(fair.lock) == entry and handedHold(fair.lock)
if handed then
  local handedKind, handedToken, handedOwner = readHold(grants, handed, epoch)
  if handedKind == 'g' and handedOwner == owner then
    keepAtLeast(fair.lock, lease)
    keepGrants(grants, lease)
    keepFence(fair.fence, lease + fair.idle)
    return {'granted', handedToken, handed}
  end
end
-- The owner holds it: as in Redisson, the same owner re-enters, whichever call asks (in this process
-- or another); this wait is over.
leaveQueue(fair, entry)
redis.call('hincrby', fair.lock, owner, 1)
keepAtLeast(fair.lock, lease)
keepFence(fair.fence, lease + fair.idle)
recordHold(grants, holdId, 'e', epoch, owner, lease, epoch)
return {'reentered', epoch}
