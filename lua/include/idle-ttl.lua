-- The idle key TTL argument (see fencing.lua), apart so that a script that only grants an exclusive
-- token (see exclusive-token.lua) defines no more than it uses. The BADARG reply for an idle TTL the
-- scripts refuse, or nil.
local function idleTtlProblem(idleArg)
  local idle = tonumber(idleArg)
  if not idle or idle < 1 or idle > 86400000 or idle % 1 ~= 0 then
    return redis.error_reply('BADARG idle key TTL must be whole ms in 1..86400000, got ' .. tostring(idleArg))
  end
  return nil
end
