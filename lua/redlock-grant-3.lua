#!lua
-- RedLock vote on one master: SET NX PX under the round's token, and the name's next fencing token. A
-- refused vote of a waiting acquisition registers its process in the name's waiting registry (the
-- simple lock's, see waiting-registration.lua), so that a release wakes one waiting process instead of
-- all of them (see redlock-release-3.lua). Safe to run twice: a repeat of a grant that landed (a client
-- that sent it again after a reconnect) finds its own token and changes nothing; a repeated refusal
-- keeps the place the first one took.
-- KEYS[1]  lock string          <prefix>:{<name>}          value = the token (a simple lock's format)
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence    kept a lease + ARGV[3] (see fencing.lua)
-- KEYS[3]  waiting processes    <prefix>:{<name>}:waiting  client id -> time it registered (µs)
-- ARGV[1]  token                unique to this attempt on this master: '<36-character id>:<owner id>'
-- ARGV[2]  lease in ms          whole number in 1..31536000000
-- ARGV[3]  idle key TTL in ms   how long the fencing counter outlives the lease (see fencing.lua)
-- ARGV[4]  client id of the caller's process
-- ARGV[5]  waiting flag         '1' the caller waits if refused and its process has other waiters for
--                               this lock; '0' it waits, no other, and an earlier vote of its wait was
--                               refused (its process may be registered); '-' it waits, no other, never
--                               refused (not registered: a grant leaves the registry alone); 'once' a
--                               single attempt (never registered)
-- Returns  {'granted', fencingToken}  acquired (a new token); a repeat of this grant: the counter as it
--                                     is, nothing changed
--          {'refused', pttl}          held under another token (or by another lock kind); pttl = what
--                                     is left of its lease (-1: none)
--          error BADARG before any write when an argument is unusable
--!include idle-ttl.lua
--!include lease-text.lua
--!include exclusive-token.lua
local token, lease, client, flag = ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[5]
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
local badIdle = idleTtlProblem(ARGV[3])
if badIdle then return badIdle end
if not client or client == '' then return redis.error_reply('BADARG client id is empty') end
if flag ~= '0' and flag ~= '1' and flag ~= '-' and flag ~= 'once' then
  return redis.error_reply('BADARG waiting flag must be 0, 1, - or once, got ' .. tostring(flag))
end
local fenceKeep = lease + tonumber(ARGV[3])
local granted = redis.call('set', KEYS[1], token, 'px', leaseText(ARGV[2], lease), 'nx')
-- The uncontended vote (its process not registered): granted before the registry's steps are defined
-- (each step a script defines costs Redis something at every call).
if granted and (flag == '-' or flag == 'once') then
  return {'granted', nextExclusiveToken(KEYS[2], fenceKeep)}
end
--!include waiting-registration.lua
if granted then
  grantedWaiting(KEYS[3], client, flag)
  return {'granted', nextExclusiveToken(KEYS[2], fenceKeep)}
end
-- pcall: a hash here is another lock kind's hold, never this token
if redis.pcall('get', KEYS[1]) == token then return {'granted', tonumber(redis.call('get', KEYS[2]) or '0')} end
registerWaiting(KEYS[3], client, flag)
return {'refused', redis.call('pttl', KEYS[1])}
