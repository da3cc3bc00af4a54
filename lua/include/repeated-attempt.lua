-- An attempt can run twice: its connection dropped after Redis ran it but before the reply came, and
-- the client sent it again on the new connection (ioredis does, at its defaults). For the kinds that
-- count holds, the caller says how many holds it knew its holder had before the attempt; a holder that
-- has exactly one more already got what this attempt asks for, and the repeat changes nothing. (Left
-- alone, it would count a second hold that no caller ever releases: the lock would stay for its lease.)

-- The holds the caller knew of (nil: not said, ''), or nil and the BADARG reply to return before any write.
local function heldBeforeArgument(value)
  if value == nil or value == '' then return nil end
  local holds = tonumber(value)
  if not holds or holds < 0 or holds % 1 ~= 0 then
    return nil, redis.error_reply('BADARG holds before must be a whole number >= 0, got ' .. tostring(value))
  end
  return holds
end

-- The lease of `key` made at least `lease` ms, as the attempt asked. A repeat finds it set already; but
-- the same reply also answers a caller that lost track of a hold whose lease is nearly over (its
-- record expired here a moment before Redis expired the key), and that caller counts on a full lease.
local function extendLease(key, lease)
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
end

-- Whether a holder with `count` holds (a number, or a hold count string) is already one past `heldBefore`.
local function alreadyLanded(count, heldBefore)
  return heldBefore ~= nil and tonumber(count) == heldBefore + 1
end
