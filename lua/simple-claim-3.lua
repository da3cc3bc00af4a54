#!lua flags=allow-oom
-- Simple lock: settle an attempt whose reply never came (the connection dropped, the call timed out):
-- if it landed, its hold is the caller's (claimed); if not, its token is cancelled, so that a copy of
-- it still on its way (a client re-sends commands after a reconnect) takes nothing when it comes.
-- KEYS[1]  lock string          (see simple-lock-5.lua)
-- KEYS[2]  fencing counter      (see fencing.lua)
-- KEYS[3]  recent releases      (see release-once.lua)
-- ARGV[1]  token                the unanswered attempt's token
-- Returns  {'granted', token}    it landed and is still held: the caller's now (token: the fencing
--                                counter, which no grant moved while the lock is held)
--          {'cancelled'}         it did not land (now it never will), or its hold ended already
--          error BADARG before any write when the token is empty
--!include release-once.lua
local token = ARGV[1]
if not token or token == '' then return redis.error_reply('BADARG token is empty') end
-- pcall: a hash here is another lock kind's hold, not ours
if redis.pcall('get', KEYS[1]) == token then return {'granted', tonumber(redis.call('get', KEYS[2]) or '0')} end
if not tokenEnded(KEYS[3], token) then cancelToken(KEYS[3], token) end
return {'cancelled'}
