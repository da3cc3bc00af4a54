#!lua
-- Simple lock: SET NX PX, not re-entrant; a refused waiter's process is registered to be woken.
-- KEYS[1]  lock string          <prefix>:{<name>}          value = the token (see simple-unlock-5.lua)
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence    kept a lease + ARGV[5] (see fencing.lua)
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting  (see lock-5.lua)
-- KEYS[4]  hand-over            <prefix>:{<name>}:next     (see hand-over.lua)
-- KEYS[5]  recent releases      <prefix>:{<name>}:releases (see release-once.lua): a copy of an
--                               attempt whose hold was released, or that was cancelled, takes nothing
-- ARGV[1]  token                unique to this acquisition: '<36-character id>:<owner id>'
-- ARGV[2]  lease in ms          whole number in 1..31536000000
-- ARGV[3]  client id of the caller's process
-- ARGV[4]  waiting flag         (see lock-5.lua)
-- ARGV[5]  idle key TTL in ms   how long the fencing counter outlives the lease (see fencing.lua)
-- Returns  {'granted', fencingToken, others}  acquired (a new token, see fencing.lua); others = 1
--                                     when other processes wait for the lock, else 0
--                                     (a repeat of an attempt that already landed, its connection gone
--                                     before the reply: the lock holds this token; the current counter
--                                     value, others 0, nothing changes)
--          {'refused', pttl}          held (by anyone, this owner included: it does not nest), or free
--                                     but reserved for another process; pttl = how long that lasts at most
--                                     (also a copy of an attempt whose hold was released since its first
--                                     run, or that was cancelled: nothing changes, pttl 0 when the lock is free)
--          error BADARG before any write when an argument is unusable
--!include waiting-args.lua
--!include idle-ttl.lua
--!include exclusive-token.lua
--!include release-once.lua
--!include lease-text.lua
local token, lease = ARGV[1], tonumber(ARGV[2])
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
local leaseArg = leaseText(ARGV[2], lease)
local client, flag = ARGV[3], ARGV[4]
local problem = checkWaitingArgs(client, flag)
if problem then return redis.error_reply(problem) end
local badIdle = idleTtlProblem(ARGV[5])
if badIdle then return badIdle end
-- A copy of an attempt, sent again after its reply was lost, may come after its hold was released (the
-- library claimed it, and its holder let it go), or after the library gave the attempt up (cancelled,
-- see simple-claim-3.lua): it must not take the lock under a token nobody will release.
if tokenEnded(KEYS[5], token) then return {'refused', math.max(0, redis.call('pttl', KEYS[1]))} end
-- One EXISTS for the waiting registry and the hand-over: each is counted as often as it is named, so
-- the count is 2 or more exactly when the hand-over key exists (and 0 when neither does).
local existing = redis.call('exists', KEYS[3], KEYS[4], KEYS[4])
-- No process waits and the lock is not reserved (the uncontended case): a grant has nothing else to
-- look at (no registration to leave or move, no hand-over to use up, nobody else waiting).
local quiet = existing == 0
if quiet and redis.call('set', KEYS[1], token, 'px', leaseArg, 'nx') then
  return {'granted', nextExclusiveToken(KEYS[2], lease + tonumber(ARGV[5])), 0}
end
-- Past the uncontended case: the steps of the waiting registry and the hand-over (defined only here, as
-- each step a script defines costs Redis something at every call).
--!include waiting-registration.lua
--!include hand-over.lua
local reservedTtl, mine = nil, false
if existing >= 2 then reservedTtl, mine = reservation(KEYS[4], client) end
if not quiet and not reservedTtl and redis.call('set', KEYS[1], token, 'px', leaseArg, 'nx') then
  local fencingToken = nextExclusiveToken(KEYS[2], lease + tonumber(ARGV[5]))
  -- A hand-over is used up by the grant; this process's own turn keeps the lock reserved for it.
  if mine == 'pass' then redis.call('del', KEYS[4]) end
  grantedWaiting(KEYS[3], client, flag)
  local others = othersWaiting(KEYS[3], client)
  return {'granted', fencingToken, others and 1 or 0}
end
-- pcall: a hash here is another lock kind's hold, not ours
if redis.pcall('get', KEYS[1]) == token then return {'granted', tonumber(redis.call('get', KEYS[2]) or '0'), 0} end
registerWaiting(KEYS[3], client, flag)
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 and reservedTtl then ttl = reservedTtl end
return {'refused', ttl}
