-- The part of hold-ids.lua an uncontended grant or release needs (see lock-5.lua, unlock-6.lua), apart
-- so that such a call defines little more than it uses: each function a script defines costs Redis
-- something at every call. The records themselves are described in hold-ids.lua.
--!include token-text.lua
local ENDED_MEMORY_MS = 60000
local ENDED_MEMORY_TEXT = '60000' -- the same, as redis.call is best given it
-- The kind a live record of another epoch reads as.
local RAN_OUT = 'x'
local PRUNE_AT = 256
-- An unlock by owner's own record (see release-call.lua) has this after its kind. The pruning spares
-- it, up to CALLS_KEPT of them: a copy of that call finding no record would end another hold of the
-- owner. (Such calls are rare; a hot key churns PRUNE_AT records within a reconnect.)
local CALL_MARK = '#'
local CALLS_KEPT = 64

-- The id argument (`what` names it in the error), or nil and the BADARG reply to return before any write.
local function holdIdArgument(value, what)
  if value == nil or value == '' then return nil, redis.error_reply('BADARG ' .. what .. ' is empty') end
  return value
end

-- The records this run of the script read or wrote, by grants key and hold id (false: none), so that
-- a script that looks at one record twice asks Redis once: each call inside a script has a cost.
local seenHolds = {}

local function recordValue(grants, id)
  local at = grants .. '\0' .. id
  local value = seenHolds[at]
  if value == nil then
    value = redis.call('hget', grants, id) or false
    seenHolds[at] = value
  end
  return value
end

local function writeRecord(grants, id, value)
  redis.call('hset', grants, id, value)
  seenHolds[grants .. '\0' .. id] = value
end

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

-- Hold `id` ended with 'r', the last hold of a lock that has one owner at a time (reentrant, fair): no
-- live hold is left that the grants hash must outlive, so it is kept the ended records' memory from
-- now, set outright in one call (keepGrants takes two when the TTL is already as long, as it is when
-- the hold ends within the millisecond it was taken).
local function endLastHold(grants, id)
  writeRecord(grants, id, 'r')
  redis.call('pexpire', grants, ENDED_MEMORY_TEXT)
end
