-- What both fair scripts check before any write, and the names of the fair lock's entries and lock hash
-- fields (see fair-queue.lua), apart so that an uncontended call defines no more than it uses.
--!include publish-command.lua
--!include idle-ttl.lua
local GRANTED_TO = '\0granted-to'
local HANDED_HOLD = '\0handed-hold'

--!include acceptance-lease.lua

-- The BADARG reply for a lease or an acceptance lease both fair scripts refuse, or nil.
local function fairArgumentProblem(leaseArg, acceptanceArg)
  local lease = tonumber(leaseArg)
  if not lease or lease < 1 or lease > 31536000000 or lease % 1 ~= 0 then
    return redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(leaseArg))
  end
  return acceptanceLeaseProblem(acceptanceArg)
end

-- The BADARG reply for an owner id the fair scripts refuse (empty, or holding NUL), or nil.
local function ownerProblem(owner)
  if not owner or owner == '' then return redis.error_reply('BADARG owner id is empty') end
  if string.find(owner, '\0', 1, true) then return redis.error_reply('BADARG owner id holds a NUL character') end
  return nil
end

-- The BADARG reply for a waiter id not of the shape '<client id>:<nonce>', or nil.
local function waiterIdProblem(waiterId)
  if not waiterId or not string.find(waiterId, ':[^:]+$') then
    return redis.error_reply('BADARG waiter id must be <client id>:<nonce>, got ' .. tostring(waiterId))
  end
  return nil
end

-- The queue entry of `owner`'s wait `waiterId`.
local function waiterEntry(owner, waiterId)
  return owner .. '\0' .. waiterId
end

