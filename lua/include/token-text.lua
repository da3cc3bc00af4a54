-- A fencing token (or an epoch, see hold-ids.lua) as its digits: Lua's own number-to-text keeps 14
-- digits only ('1.7958e+15'). Every token is a whole number below 2^53 (see fencing.lua), printed as
-- an integer ('%d', a 64-bit long here), which costs a third of '%.0f'; anything else (a counter
-- someone overwrote) is printed with '%.0f', as it always was.
local function tokenText(token)
  if token >= 0 and token < 9007199254740992 and token % 1 == 0 then return string.format('%d', token) end
  return string.format('%.0f', token)
end
