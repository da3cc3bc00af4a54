#!lua
-- RedLock vote on one master: SET NX PX under the round's token, and the name's next fencing token.
-- Nothing else: no waiting registry, no hand-over (a RedLock's waiters listen on the unlock channel,
-- see redlock-release-2.lua). Safe to run twice: a repeat of a grant that landed (a client that sent
-- it again after a reconnect) finds its own token and changes nothing.
-- KEYS[1]  lock string          <prefix>:{<name>}          value = the token (a simple lock's format)
-- KEYS[2]  fencing counter      <prefix>:{<name>}:fence    kept a lease + ARGV[3] (see fencing.lua)
-- ARGV[1]  token                unique to this attempt on this master: '<36-character id>:<owner id>'
-- ARGV[2]  lease in ms          whole number in 1..31536000000
-- ARGV[3]  idle key TTL in ms   how long the fencing counter outlives the lease (see fencing.lua)
-- Returns  {'granted', fencingToken}  acquired (a new token); a repeat of this grant: the counter as it
--                                     is, nothing changed
--          {'refused', pttl}          held under another token (or by another lock kind); pttl = what
--                                     is left of its lease (-1: none)
--          error BADARG before any write when an argument is unusable
--!include idle-ttl.lua
--!include exclusive-token.lua
local token, lease = ARGV[1], tonumber(ARGV[2])
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
  return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(ARGV[2]))
end
local badIdle = idleTtlProblem(ARGV[3])
if badIdle then return badIdle end
if redis.call('set', KEYS[1], token, 'px', lease, 'nx') then
  return {'granted', nextExclusiveToken(KEYS[2], lease + tonumber(ARGV[3]))}
end
-- pcall: a hash here is another lock kind's hold, never this token
if redis.pcall('get', KEYS[1]) == token then return {'granted', tonumber(redis.call('get', KEYS[2]) or '0')} end
return {'refused', redis.call('pttl', KEYS[1])}
