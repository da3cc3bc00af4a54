#!lua flags=no-writes
-- Read-write lock, read side: what is left of the longest live read hold (read only).
-- KEYS[1]  readers              zset owner -> expiry (server ms)
-- Returns  ms until the last live read hold runs out; -2 when no read hold is live (PTTL's "no key")
--!include server-time.lua
local now = nowMs()
local last = redis.call('zrange', KEYS[1], -1, -1, 'withscores')
if not last[2] or tonumber(last[2]) <= now then return -2 end
return tonumber(last[2]) - now
