-- An exclusive lock's next fencing token (see fencing.lua for why a token is never below the clock),
-- apart so that a script that grants nothing else (redlock-grant-3.lua) defines no more than it uses.
--!include token-text.lua

-- The next token of `fence` for an exclusive lock (reentrant, fair, simple: they share one counter per
-- name, and their lock key admits one holder at a time): a grant's hold is then the only live one the
-- counter numbers, so the counter is kept `keepMs` (a lease plus the idle TTL) from now, whatever TTL
-- an earlier hold left it (the counter lives `idleKeyTtl` past the last grant or renewal, see fencing.lua).
-- The clock is read first and the counter swapped for it in one SET … GET, rewritten as counter + 1
-- only when the counter had reached the clock (two grants within a µs, or a clock that stepped back).
-- `timeUs`: Redis's clock in µs, when the script has read it already (nil: read here).
local function nextExclusiveToken(fence, keepMs, timeUs)
  local token = timeUs
  if not token then
    local time = redis.call('time')
    token = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  local counter = tonumber(redis.call('set', fence, tokenText(token), 'px', keepMs, 'get') or '0') or 0
  if counter >= token then
    token = counter + 1
    redis.call('set', fence, tokenText(token), 'px', keepMs)
  end
  return token
end
