-- A lease argument as redis.call is best given it: the caller's own digits when they are plain (as the
-- client sends them). redis.call prints a Lua number with '%.17g' each time, which costs about a third
-- of a PEXPIRE; a whole number written any other way ('3e4') is printed once, here.
local function leaseText(arg, lease)
  if string.find(arg, '^[1-9]%d*$') then return arg end
  return string.format('%d', lease)
end
