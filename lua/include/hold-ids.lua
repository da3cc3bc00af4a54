-- Every hold of a reentrant or fair lock, or of a read-write lock's side, has an id of its own: the
-- client makes one for each attempt, and the hold the attempt takes (a first grant or a re-entry) is
-- recorded under it in the lock's `grants` hash. A release names the hold it ends, so a copy of an old
-- release (re-sent by a client after a lost reply, or replayed after a failover), from any process,
-- can never touch another hold of the same owner; and a repeated attempt finds its own record instead
-- of counting a second hold.
--
-- A value in the grants hash is one of:
--   'g<token>/<epoch>|<owner>'  a live first grant of <owner> with fencing token <token>
--   'e<token>/<epoch>|<owner>'  a live re-entry (the holder's token at the time)
--   (<epoch>: the fencing counter when the hold was taken, which no grant moves while the lock is held:
--   a record whose epoch is not the counter's now belongs to a lock that ran out since, even when the
--   same owner holds it again; '/<epoch>' may be absent where a kind does not keep one)
--   'r'                 ended: its release freed the lock
--   'd'                 ended: its release left other holds of the owner
--   'o'                 ended by another call of the same owner (an unlock by owner, see unlock-6.lua)
--   'x'                 ended without a release: the lock expired or was forced under it, or its
--                       attempt was cancelled before it landed
--   'r#', 'd#', 'x#'    the record of an unlock by owner's own call: what it did (see CALL_MARK)
-- An owner id is opaque: the value keeps everything after the first '|' as it is. Ended records
-- answer a repeat with the first copy's outcome; they live ENDED_MEMORY_MS at least, and are pruned
-- past PRUNE_AT entries (a repeat that comes later than that is told the hold is not there).
--!include expiry.lua
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
-- last grant (see above).
local function epochOf(fence)
  return tonumber(redis.call('get', fence) or '0')
end

-- The record of hold `id`: nil when there is none; else kind ('g', 'e', 'r', 'd', 'o' or 'x') and, for a
-- live hold, its token and owner. Given the fencing counter now (`epoch`: a number, or the counter's
-- key, read only when a live record needs it), a live record of another epoch reads as 'x' (its lock
-- ran out; see above).
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

-- The grants hash lives at least as long as the lock (`lease` ms) and as the ended records' memory.
local function keepGrants(grants, lease)
  keepAtLeast(grants, grantsKeepMs(lease))
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

-- Records hold `id` of `owner`, taken as `kind` ('g' or 'e') with fencing token `token` in `epoch` (may be
-- nil). `onlyHold`: no other hold of the lock is live (a first grant of a free lock), so the hash's
-- expiry is set outright instead of never shortened.
local function recordHold(grants, id, kind, token, owner, lease, epoch, onlyHold)
  pruneEnded(grants)
  -- tokenText: Lua's own number-to-text keeps 14 digits, and tokens have 16 (see fencing.lua).
  local text = tokenText(token)
  local numbers = epoch == nil and text or text .. '/' .. (epoch == token and text or tokenText(epoch))
  writeRecord(grants, id, kind .. numbers .. '|' .. owner)
  if onlyHold then
    redis.call('pexpire', grants, grantsKeepMs(lease))
  else
    keepGrants(grants, lease)
  end
end

-- Hold `id` ended with `outcome` ('r', 'd', 'o' or 'x'), remembered for a repeat of its release. ('d'
-- leaves other holds of the owner live, and with them an expiry at least as long as the lock's.)
local function endHold(grants, id, outcome)
  writeRecord(grants, id, outcome)
  if string.sub(outcome, 1, 1) ~= 'd' then keepGrants(grants, 1) end
end

-- Hold `id` ended with 'r', the last hold of a lock that has one owner at a time (reentrant, fair): no
-- live hold is left that the grants hash must outlive, so it is kept the ended records' memory from
-- now, set outright in one call (keepGrants takes two when the TTL is already as long, as it is when
-- the hold ends within the millisecond it was taken).
local function endLastHold(grants, id)
  writeRecord(grants, id, 'r')
  redis.call('pexpire', grants, ENDED_MEMORY_TEXT)
end

-- A force: every live hold recorded in `grants` ends as 'x', so that its release (or a copy of its
-- attempt) finds it ended. The ended records stay, to answer repeats: a cancelled attempt's copy that
-- found none would take the lock. No live hold is left, so the hash keeps the ended records' memory.
local function endLiveHolds(grants)
  local all = redis.call('hgetall', grants)
  if #all == 0 then return end
  for i = 1, #all, 2 do
    local kind = string.sub(all[i + 1], 1, 1)
    if kind == 'g' or kind == 'e' then writeRecord(grants, all[i], 'x') end
  end
  redis.call('pexpire', grants, ENDED_MEMORY_TEXT)
end

-- The id of a live hold of `owner`, or nil: a re-entry before the first grant (as a nest unwinds;
-- which re-entry, Redis cannot tell, and an owner's holds count alike).
local function liveHoldOf(grants, owner, epoch)
  local all, first = redis.call('hgetall', grants), nil
  for i = 1, #all, 2 do
    local value = all[i + 1]
    local kind = string.sub(value, 1, 1)
    if kind == 'g' or kind == 'e' then
      local bar = string.find(value, '|', 2, true)
      local slash = string.find(value, '/', 2, true)
      local current = epoch == nil or not slash or slash > bar or tonumber(string.sub(value, slash + 1, bar - 1)) == epoch
      if current and string.sub(value, bar + 1) == owner then
        if kind == 'e' then return all[i] end
        first = all[i]
      end
    end
  end
  return first
end
