-- Recording a first grant (see hold-records.lua, hold-ids.lua): what an uncontended grant needs.
--!include token-text.lua
--!include hold-records.lua

-- How long the grants hash must live past a hold of `lease` ms: the lease, and the ended records'
-- memory (given as text: redis.call prints a Lua number with '%.17g' each time).
local function grantsKeepMs(lease)
  if lease <= ENDED_MEMORY_MS then return ENDED_MEMORY_TEXT end
  return lease
end

-- Drops the ended records once there are many (a long-held lock re-entered again and again, a hot key),
-- in HDELs of up to 1000 fields each (one call per record cost more than the rest of the pruning).
local function pruneEnded(grants)
  if redis.call('hlen', grants) <= PRUNE_AT then return end
  local all = redis.call('hgetall', grants)
  local ended, calls = {}, {}
  for i = 1, #all, 2 do
    local value = all[i + 1]
    local kind = string.sub(value, 1, 1)
    if kind ~= 'g' and kind ~= 'e' then
      local list = string.sub(value, 2, 2) == CALL_MARK and calls or ended
      list[#list + 1] = all[i]
    end
  end
  if #calls > CALLS_KEPT then
    for _, id in ipairs(calls) do ended[#ended + 1] = id end
  end
  for _, id in ipairs(ended) do seenHolds[grants .. '\0' .. id] = false end
  for from = 1, #ended, 1000 do
    redis.call('hdel', grants, unpack(ended, from, math.min(from + 999, #ended)))
  end
end

-- The value of a live record (see hold-ids.lua): kind 'g' or 'e', the token and the epoch as digits
-- (`epochText` nil where a kind keeps none), and the owner, kept as it is after the first '|'.
local function liveRecord(kind, tokenDigits, epochText, owner)
  if epochText == nil then return kind .. tokenDigits .. '|' .. owner end
  return kind .. tokenDigits .. '/' .. epochText .. '|' .. owner
end

-- Records hold `id`, the first grant of a free lock to `owner` with fencing token `token` (its epoch),
-- as recordHold does (see hold-ids.lua): the only live hold, so the hash's expiry is set outright.
local function recordFirstGrant(grants, id, token, owner, lease)
  pruneEnded(grants)
  local digits = tokenText(token)
  writeRecord(grants, id, liveRecord('g', digits, digits, owner))
  redis.call('pexpire', grants, grantsKeepMs(lease))
end
