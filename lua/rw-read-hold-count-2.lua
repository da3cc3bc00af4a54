#!lua flags=no-writes
-- Read-write lock, read side: how many read holds an owner has (read only), 0 once its hold ran out,
-- also before a script has pruned it (see rw-readers.lua).
-- KEYS[1]  readers              zset owner -> expiry (server ms)
-- KEYS[2]  read hold counts     hash owner -> hold count
-- ARGV[1]  owner id
-- Returns  the owner's live read holds (0: none)
--!include server-time.lua
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= nowMs() then return 0 end
return tonumber(redis.call('hget', KEYS[2], ARGV[1]) or '0')
