-- A simple lock's release lands once, and every repeat of it says so. A release runs again when an
-- application's ioredis client sends it on its new connection after the old one died before the reply
-- came, or when the library sends it again through an outage; by then the hold is gone, and the lock
-- may be another's. Each release has an id (the hold's token, or the call id of a release by owner):
-- once the release lands, the id goes to the head of a short list under the lock's hash tag, and a
-- repeat that finds it there replies 'released' and touches nothing. The list keeps the newest
-- RELEASE_MEMORY ids and lives RELEASE_MEMORY_MS after the latest release: far past the time a caller
-- waits for a release's reply (operationTimeout), and short enough to cost little on a busy server.
local RELEASE_MEMORY = 1000
local RELEASE_MEMORY_MS = 60000

-- Whether the release `id` landed already (recently enough to be remembered).
local function landedBefore(released, id)
  return redis.call('lpos', released, id) ~= false
end

local function rememberRelease(released, id)
  if redis.call('lpush', released, id) > RELEASE_MEMORY then redis.call('rpop', released) end
  redis.call('pexpire', released, RELEASE_MEMORY_MS)
end
