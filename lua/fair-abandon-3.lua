#!lua flags=allow-oom
-- Fair lock: a waiter gives up (tryLock timed out, aborted, failed): leave the queue without a trace.
-- KEYS[1]  lock hash
-- KEYS[2]  waiter queue
-- KEYS[3]  waiter deadlines
-- ARGV[1]  owner id
-- Returns  1 if the lock had been handed to this waiter (it is released again by the caller), else 0;
--          error BADARG (nothing changed) for an empty owner id. Safe to send again.
if not ARGV[1] or ARGV[1] == '' then return redis.error_reply('BADARG owner id is empty') end
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('hget', KEYS[1], ARGV[1]) == '0' then
  return 1
end
return 0
