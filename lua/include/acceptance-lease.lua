-- The BADARG reply for an acceptance lease (the fair lock's and the semaphore's hand-overs) the scripts
-- refuse, or nil.
local function acceptanceLeaseProblem(acceptanceArg)
  local acceptance = tonumber(acceptanceArg)
  if not acceptance or acceptance < 1 or acceptance > 2147483647 or acceptance % 1 ~= 0 then
    return redis.error_reply('BADARG acceptance lease must be whole ms in 1..2147483647, got ' .. tostring(acceptanceArg))
  end
  return nil
end
