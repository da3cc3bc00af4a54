-- The arguments of a release call (see release-call.lua), checked before any write, apart so that a
-- release checks them before it defines the steps only a contended or repeated release needs.
--!include hold-records.lua
--!include publish-command.lua

-- The release mode argument, or nil and the BADARG reply to return before any write.
local function releaseModeArgument(which)
  if which ~= 'one' and which ~= 'any' then
    return nil, redis.error_reply('BADARG which must be one or any, got ' .. tostring(which))
  end
  return which
end

-- The arguments a release call of any kind takes, checked before any write: the owner, the hold (or
-- call) id, the lease in ms re-applied while holds remain, the publish command and the release mode.
-- Returns the id, the lease and the mode, or nil and the BADARG reply to return.
local function releaseCallArguments(owner, holdId, lease, publish, which)
  if not owner or owner == '' then return nil, redis.error_reply('BADARG owner id is empty') end
  local id, badId = holdIdArgument(holdId, 'hold id')
  if badId then return nil, badId end
  local ms = tonumber(lease)
  if not ms or ms < 1 or ms > 31536000000 or ms % 1 ~= 0 then
    return nil, redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(lease))
  end
  local badPublish = publishCommandProblem(publish)
  if badPublish then return nil, badPublish end
  local mode, badMode = releaseModeArgument(which)
  if badMode then return nil, badMode end
  return {holdId = id, lease = ms, which = mode}
end
