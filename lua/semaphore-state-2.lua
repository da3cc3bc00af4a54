#!lua flags=no-writes
-- Semaphore: the limit and the permits held by live holds, read-only (expired holds are not counted).
-- KEYS[1]  holds              (see semaphore-acquire-7.lua)
-- KEYS[2]  run-time limit     (see semaphore-acquire-7.lua)
-- ARGV[1]  configured limit   used when KEYS[2] is not set
-- Returns  {limit, permits held}
--!include server-time.lua
--!include semaphore-holds.lua
return {currentLimit(KEYS[2], tonumber(ARGV[1]) or 0), permitsInUse(KEYS[1], nowMs())}
