-- Claiming the showing of an ended ask's final state, once per render interval across replicas
-- (bridge.store.base.Store.claim_render): claim.lua's, and submit.lua's for a caller that shows
-- what its submission finds ended (the submission's `claim`), in the same step.

-- Whether `token` holds the claim now: the ask ended, has a message, and nobody claimed it
-- within `interval` seconds -- then the claim is recorded, counted towards RENDER_TRIES -- or
-- this very claim was re-sent (redis-py re-sends a call whose reply was lost).
local function claim_showing(token, interval)
  local f = redis.call('HMGET', rec, 'status', 'message', 'render_by', 'render_at')
  if f[1] == 'pending' or not f[2] then
    return false
  end
  if f[3] == token then
    return true
  end
  if f[4] and tonumber(now) - tonumber(f[4]) < tonumber(interval) then
    return false
  end
  redis.call('HSET', rec, 'render_at', now, 'render_by', token)
  redis.call('HINCRBY', rec, 'render_tries', 1)
  return true
end
