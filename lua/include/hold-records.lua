-- The part of hold-ids.lua every call that reads or writes a hold's record needs (the records are
-- described there), apart, with grant-record.lua and release-record.lua, so that an uncontended grant or
-- release (see lock-5.lua, unlock-6.lua) defines little more than it uses: each function a script
-- defines costs Redis something at every call.
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
