-- Wakes one waiting process instead of every subscribed one: the longest registered in the sorted set
-- `waitingKey` (client id -> time it registered, µs) that still listens on `<channelPrefix>:<client id>`,
-- other than `except` (if given). A client nobody listens for (its process died, or its waiters left
-- and it unsubscribed) could never take the lock: it is dropped and the next one is tried. The woken
-- client keeps its place until it is granted the lock, so a newcomer that barges in first does not cost
-- it its turn.
-- Returns the client id woken, or false when no registered client listens (the rest re-check later).
local function wakeOneProcess(waitingKey, channelPrefix, publish, message, except)
  for _ = 1, 16 do
    local first = redis.call('zrange', waitingKey, 0, 1)
    local head = first[1]
    if head ~= nil and head == except then head = first[2] end
    if not head then return false end
    if redis.call(publish, channelPrefix .. ':' .. head, message) > 0 then return head end
    redis.call('zrem', waitingKey, head)
  end
  return false
end
