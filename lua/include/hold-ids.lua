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
--!include grant-record.lua
--!include release-record.lua

-- The grants hash lives at least as long as the lock (`lease` ms) and as the ended records' memory.
local function keepGrants(grants, lease)
  keepAtLeast(grants, grantsKeepMs(lease))
end

-- Records hold `id` of `owner`, taken as `kind` ('g' or 'e') with fencing token `token` in `epoch` (may be
-- nil). `onlyHold`: no other hold of the lock is live (a first grant of a free lock), so the hash's
-- expiry is set outright instead of never shortened.
local function recordHold(grants, id, kind, token, owner, lease, epoch, onlyHold)
  pruneEnded(grants)
  -- tokenText: Lua's own number-to-text keeps 14 digits, and tokens have 16 (see fencing.lua).
  local text, epochText = tokenText(token), nil
  if epoch ~= nil then epochText = epoch == token and text or tokenText(epoch) end
  writeRecord(grants, id, liveRecord(kind, text, epochText, owner))
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
