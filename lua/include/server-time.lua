-- Redis server time in ms: deadlines and expiries compare against one clock, not each client's.
local function nowMs()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
