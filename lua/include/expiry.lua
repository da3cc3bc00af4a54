-- Makes `key` live at least `ms` more, never shortening a longer TTL; a key without a TTL gets one, a
-- missing key stays missing. PEXPIRE GT does it in one call whenever the TTL is shorter (the common
-- case: a lease or a record's memory being extended); only when GT refuses (a TTL already as long, or
-- none, which GT counts as endless) is PTTL asked which of the two it was.
local function keepAtLeast(key, ms)
  if redis.call('pexpire', key, ms, 'gt') == 1 then return end
  if redis.call('pttl', key) == -1 then redis.call('pexpire', key, ms) end
end
