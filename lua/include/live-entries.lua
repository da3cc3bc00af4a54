-- Read-only listings (the lock board's inspections): what is still live in a zset of deadlines, cut at
-- `most` entries, each with the ms it has left.
--!include server-time.lua

-- `most` as a whole number >= 1, or nil and the BADARG reply.
local function mostArg(arg)
  local most = tonumber(arg)
  if not most or most < 1 or most % 1 ~= 0 then
    return nil, redis.error_reply('BADARG most must be a whole number >= 1, got ' .. tostring(arg))
  end
  return most
end

-- The first `most` members of `key` whose deadline is after `now`, flat: member, ms left, ...; with
-- `each(member)`, a value between them (member, each(member), ms left, ...).
local function liveEntries(key, now, most, each)
  local entries = {}
  local live = redis.call('zrangebyscore', key, '(' .. now, '+inf', 'withscores', 'limit', 0, most)
  for i = 1, #live, 2 do
    table.insert(entries, live[i])
    if each then table.insert(entries, each(live[i])) end
    table.insert(entries, tonumber(live[i + 1]) - now)
  end
  return entries
end
