-- Fencing tokens. A name's counter (`fence`) lives while the name is used and `idleKeyTtl` ms after its
-- last grant or renewal (past that hold's lease), then Redis holds nothing for the name. Tokens must
-- still only grow: a resource that stored token N must see a larger one after, also once the counter
-- expired, or was lost (a Redis restarted empty or from an old snapshot, a failover to a replica that
-- lagged, an eviction). So a token is never below Redis's clock: max(counter + 1, TIME in µs since the
-- Unix epoch). A name is granted far less than once per µs, so the counter never runs ahead of the
-- clock, and a counter started again from the clock is above every token handed out before, provided
-- the clock of the server that grants did not step back past them: by more than `idleKeyTtl` on one
-- server, or, across a failover, by more than the time between the last grant on the old master and
-- the first on the new one. µs since the epoch stay below 2^53 (a double, a JavaScript number and a
-- signed 64-bit column hold them exactly) until the year 2255.
--!include expiry.lua
--!include token-text.lua
--!include idle-ttl.lua
--!include exclusive-token.lua

-- Keeps `fence` (when it exists) at least `keepMs` more: it outlives every hold it numbers.
local function keepFence(fence, keepMs)
  keepAtLeast(fence, keepMs)
end

-- The next token of `fence` (see above), kept at least `keepMs` (a lease plus the idle TTL) and never
-- less than it was (a semaphore's other holds may have longer leases).
local function nextToken(fence, keepMs)
  local counter = tonumber(redis.call('get', fence) or '0') or 0
  local time = redis.call('time')
  local token = math.max(counter + 1, tonumber(time[1]) * 1000000 + tonumber(time[2]))
  redis.call('set', fence, tokenText(token), 'px', math.max(keepMs, redis.call('pttl', fence)))
  return token
end

-- The counter as it is (a read hold's token: the last write grant's), started from the clock when the
-- name has none, so a reader after an expiry never sees a token below one handed out before.
local function currentToken(fence, keepMs)
  local counter = tonumber(redis.call('get', fence) or '')
  if counter then
    keepFence(fence, keepMs)
    return counter
  end
  return nextToken(fence, keepMs)
end
