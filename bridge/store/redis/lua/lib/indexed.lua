-- The ops that keep the ask in the due index for the sweeper (scripts.Call.INDEXED: after
-- lib/core.lua): the index after the shared KEYS, and the ask's place in it right after the six
-- ARGV every op takes (bridge.store.redis.scripts.Due), before the op's own.
local due_index = KEYS[9] -- nil on Cluster, where it lives in another slot (the caller writes it)
local due_score = ARGV[7]
local due_mode = ARGV[8] -- 'nx', 'xx' or ''
local due_ttl = ARGV[9] -- seconds; the pending and created indexes share it

-- The ask joins the due index at `due_score`, set as `due_mode` says, with the index's TTL --
-- written first, as the caller would have, so an ask is never pending yet unswept; nothing
-- without the key. Then whether the ask exists (each op answers {'missing'} when it does not).
local function indexed()
  if due_index then
    if due_mode == '' then
      redis.call('ZADD', due_index, due_score, ask_id)
    else
      redis.call('ZADD', due_index, due_mode, due_score, ask_id)
    end
    if due_mode ~= 'xx' then
      redis.call('EXPIRE', due_index, due_ttl)
    end
  end
  return redis.call('EXISTS', rec) == 1
end
