-- Reading a hold's record and ending the last hold (see hold-records.lua, hold-ids.lua): what an
-- uncontended release needs.
--!include hold-records.lua

-- The fencing counter `fence` now (0 when it was never taken): the epoch of the holds taken since the
-- last grant (see hold-ids.lua).
local function epochOf(fence)
  return tonumber(redis.call('get', fence) or '0')
end

-- The record of hold `id`: nil when there is none; else kind ('g', 'e', 'r', 'd', 'o' or 'x') and, for a
-- live hold, its token and owner. Given the fencing counter now (`epoch`: a number, or the counter's
-- key, read only when a live record needs it), a live record of another epoch reads as 'x' (its lock
-- ran out; see hold-ids.lua).
local function readHold(grants, id, epoch)
  local value = recordValue(grants, id)
  if not value then return nil end
  local kind = string.sub(value, 1, 1)
  if kind ~= 'g' and kind ~= 'e' then return kind end
  local bar = string.find(value, '|', 2, true)
  local numbers = string.sub(value, 2, bar - 1)
  local slash = string.find(numbers, '/', 1, true)
  if epoch ~= nil and slash then
    if type(epoch) == 'string' then epoch = epochOf(epoch) end
    if tonumber(string.sub(numbers, slash + 1)) ~= epoch then return RAN_OUT end
  end
  return kind, tonumber(slash and string.sub(numbers, 1, slash - 1) or numbers), string.sub(value, bar + 1)
end

-- Hold `id` ended with 'r', the last hold of a lock that has one owner at a time (reentrant, fair): no
-- live hold is left that the grants hash must outlive, so it is kept the ended records' memory from
-- now, set outright in one call (keepGrants takes two when the TTL is already as long, as it is when
-- the hold ends within the millisecond it was taken).
local function endLastHold(grants, id)
  writeRecord(grants, id, 'r')
  redis.call('pexpire', grants, ENDED_MEMORY_TEXT)
end
