-- The publish command a script is given: 'publish', or 'spublish' on a Cluster (sharded pub/sub, so the
-- message stays on the key's slot). Returns the BADARG reply for anything else, or nil.
local function publishCommandProblem(publish)
  if publish == 'publish' or publish == 'spublish' then return nil end
  return redis.error_reply('BADARG publish command must be publish or spublish, got ' .. tostring(publish))
end
