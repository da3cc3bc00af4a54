#!lua
-- Reentrant lock: acquire or re-enter; a refused waiter's process is registered to be woken.
-- KEYS[1]  lock hash            <prefix>:{<name>}          field = owner id, value = hold count
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence    never expires, so tokens only grow
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting  client id -> time it registered (µs)
-- KEYS[4]  hand-over            <prefix>:{<name>}:next     client id the free lock is reserved for (see hand-over.lua)
-- ARGV[1]  lease in ms          whole number in 1..31536000000
-- ARGV[2]  owner id             <clientId>:<scopeId>
-- ARGV[3]  client id of the caller's process
-- ARGV[4]  waiting flag         '1' the caller waits if refused and its client has other waiters for
--                               this lock; '0' it waits, no other; '-' it waits, no other, and was never
--                               refused (its client is not registered); 'once' a single attempt (never registered)
-- ARGV[5]  prior owner          '' or an owner whose last hold the caller's process released in its turn
--                               (see lib/engine/process-turns.ts): that release lands here first, waking nobody
-- ARGV[6]  prior hold count     the holds the client counted for the prior owner before its release ('' = unknown)
-- ARGV[7]  token count          fencing tokens a grant takes while other processes wait, 1..1000 (else
--                               one; see fencing-tokens.lua)
-- ARGV[8]  holds before         the holds the caller knows the owner has ('' = not said): one more in
--                               the hash means this attempt already landed (see repeated-attempt.lua)
-- Returns  {'granted', token, others}  acquired; token = new fencing token (the first of the ARGV[7] taken
--                                 from KEYS[2]); others = 1 when other processes wait for the lock, else 0
--          {'reentered', token}   hold count + 1; token = the current holder's token
--                                 (a repeat that already landed: the same reply as its first run, the
--                                 token the fencing counter's current value, 'others' 0; nothing changes)
--          {'refused', pttl}      held by another owner, or free but handed over to another process;
--                                 pttl = how long that lasts at most, in ms
--          error BADARG before any write when an argument is unusable (nothing is changed)
--!include waiting-registration.lua
--!include hand-over.lua
--!include release-in-turn.lua
--!include fencing-tokens.lua
--!include repeated-attempt.lua
local lease = tonumber(ARGV[1])
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[1]))
end
local owner, client, flag = ARGV[2], ARGV[3], ARGV[4]
if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
local problem = checkWaitingArgs(client, flag)
if problem then return redis.error_reply(problem) end
local prior, priorHolds, badPrior = priorRelease(ARGV[5], ARGV[6])
if badPrior then return badPrior end
local tokens, badTokens = tokenCountArgument(ARGV[7])
if badTokens then return badTokens end
local heldBefore, badHeld = heldBeforeArgument(ARGV[8])
if badHeld then return badHeld end
if prior then releaseInTurn(KEYS[1], prior, priorHolds) end

if redis.call('exists', KEYS[1]) == 0 then
  local reservedTtl, mine = reservation(KEYS[4], client)
  if reservedTtl then
    registerWaiting(KEYS[3], client, flag)
    return {'refused', reservedTtl}
  end
  if mine then redis.call('del', KEYS[4]) end
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], lease)
  grantedWaiting(KEYS[3], client, flag)
  local others = othersWaiting(KEYS[3], client)
  return {'granted', takeTokens(KEYS[2], tokens, others), others and 1 or 0}
end
-- pcall: a string here is a simple lock's hold: held by another owner
if redis.pcall('hexists', KEYS[1], owner) == 1 then
  if alreadyLanded(redis.call('hget', KEYS[1], owner), heldBefore) then
    extendLease(KEYS[1], lease)
    local token = tonumber(redis.call('get', KEYS[2]) or '0')
    if heldBefore == 0 then return {'granted', token, 0} end
    return {'reentered', token}
  end
  redis.call('hincrby', KEYS[1], owner, 1)
  -- never shorten the lease an outer hold (or its watchdog) relies on
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  grantedWaiting(KEYS[3], client, flag)
  return {'reentered', tonumber(redis.call('get', KEYS[2]) or '0')}
end
registerWaiting(KEYS[3], client, flag)
return {'refused', redis.call('pttl', KEYS[1])}
