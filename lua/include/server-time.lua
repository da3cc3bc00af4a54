-- Redis server time in ms: deadlines and expiries compare against one clock, not each client's.
local function nowMs()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Redis server time in ms (as nowMs gives it), and the same reading in µs: read once per call, for
-- its deadlines and its queue's order alike.
local function serverNow()
  local time = redis.call('time')
  local seconds, micros = tonumber(time[1]), tonumber(time[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros
end
