-- The arguments of an attempt that may register its process as waiting (see waiting-registration.lua):
-- the caller's client id and its waiting flag. Apart from the registry, so that a script checks them
-- before any write and defines the registry's steps only where it gets past its uncontended grant.
-- Returns the BADARG message, or nil.
local function checkWaitingArgs(client, othersWaiting)
  if client == nil or client == '' then return 'BADARG client id is empty' end
  if othersWaiting ~= '0' and othersWaiting ~= '1' and othersWaiting ~= '-' and othersWaiting ~= 'once' then
    return 'BADARG waiting flag must be 0, 1, - or once, got ' .. tostring(othersWaiting)
  end
  return nil
end
