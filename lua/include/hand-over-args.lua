-- The hand-over arguments of a release (see hand-over.lua), apart from the hand-over itself so that a
-- release checks them before any write and defines the hand-over's steps only where it has one to make.

-- The turn-length argument of a release made with 'keep', or nil and the BADARG reply to return.
local function turnMsArgument(value)
  local ms = tonumber(value)
  if not ms or ms < 1 or ms > 3600000 or ms % 1 ~= 0 then
    return nil, redis.error_reply('BADARG turn ms must be whole ms in 1..3600000, got ' .. tostring(value))
  end
  return ms
end

-- A release's hand-over arguments: `mode` 'pass' or 'keep'; a kept release also names its process
-- (`client`) and what is left of its turn (`rawTurnMs`). Returns the turn's ms (nil for 'pass'), or nil
-- and an error reply before anything is written.
local function handOverArguments(mode, client, rawTurnMs)
  if mode ~= 'pass' and mode ~= 'keep' then
    return nil, redis.error_reply('BADARG hand-over must be pass or keep, got ' .. tostring(mode))
  end
  if mode == 'pass' then return nil, nil end
  if not client or client == '' then return nil, redis.error_reply('BADARG client id is empty') end
  return turnMsArgument(rawTurnMs)
end
