-- The arguments every hold-count release takes (reentrant lock, both sides of a read-write lock).
-- Returns lease (ms) and expected hold count (nil: unknown), or nil and the BADARG reply to return
-- before any write.
local function releaseArguments(owner, lease, publish, expected)
  if not owner or owner == '' then return nil, nil, redis.error_reply('BADARG owner id is empty') end
  local ms = tonumber(lease)
  if not ms or ms < 1 or ms > 31536000000 or ms % 1 ~= 0 then
    return nil, nil, redis.error_reply('BADARG lease must be whole ms in 1..31536000000, got ' .. tostring(lease))
  end
  if publish ~= 'publish' and publish ~= 'spublish' then
    return nil, nil, redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(publish))
  end
  if expected == nil or expected == '' then return ms, nil end
  local holds = tonumber(expected)
  if not holds or holds < 1 or holds % 1 ~= 0 then
    return nil, nil, redis.error_reply('BADARG expected hold count must be a whole number >= 1, got ' .. tostring(expected))
  end
  return ms, holds
end
