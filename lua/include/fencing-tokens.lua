-- Fencing tokens for a grant. A process that may take a contended lock again and again inside its
-- turn asks for a block of them with one grant: when other processes wait, the grant gets the first,
-- and the process gives the rest, in order, to its next holds of the same Redis hold without a round
-- trip (see lib/engine/process-turns.ts); when none waits there is no turn to lend in, and the grant
-- takes one. Any later grant's token is above the whole block.

-- The token count the client asked for, or nil and the BADARG reply to return before any write.
local function tokenCountArgument(value)
  local count = tonumber(value)
  if not count or count < 1 or count > 1000 or count % 1 ~= 0 then
    return nil, redis.error_reply('BADARG token count must be a whole number in 1..1000, got ' .. tostring(value))
  end
  return count
end

-- The first of `count` fresh tokens from the fencing counter `fenceKey` (just one unless `contended`).
local function takeTokens(fenceKey, count, contended)
  if not contended then count = 1 end
  return redis.call('incrby', fenceKey, count) - count + 1
end
