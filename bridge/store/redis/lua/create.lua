-- A new ask: its record, its first event, the indexes it joins, and the lease of the call about
-- to wait for it. Replies {'ok' or 'exists', the status}.
local body = ARGV[10]
local expires_at = ARGV[11]
local answerers = ARGV[12] -- JSON array ('[]': anyone may answer)
local deferred = ARGV[13] -- '1': the answers go to the feed
local ttl_ms = ARGV[14]
local lease_ms = ARGV[15]
local detail = ARGV[16] -- the 'created' event's
local waker = ARGV[17] -- the creating process's wake-up channel (it is about to wait)
local required = ARGV[18] -- people required to agree
local pending_member = ARGV[19] -- '<platform>\0<id>', as unpend() spells it
local terms_channel = ARGV[20] -- where the processes that judge clicks hear of it ('': nowhere)

if indexed() then
  -- the same ask again is a retry of this create; another one under that id is a duplicate
  local stored = redis.call('HGET', rec, 'body')
  local same = stored == body or stored == undescribed(body) -- ended: kept without them
  return {same and 'ok' or 'exists', redis.call('HGET', rec, 'status')}
end
-- a field at its default is not stored (each costs ~50 bytes of every pending ask): no
-- 'answerers' when anyone may answer, no 'deferred' unless deferred, no 'handoff' yet; 'req'
-- only when more than one must agree (a one-person ask reads no more)
-- 'platform' (the one in the pending member): a sweep's visit answers with it, and reading it
-- from the body cost an expiry a fifth of its time on Redis 7 (dropped once settled: tidy)
redis.call('HSET', rec, 'body', body, 'status', 'pending', 'exp', expires_at, 'platform',
  string.sub(pending_member, 1, #pending_member - #ask_id - 1))
if answerers ~= '[]' then
  redis.call('HSET', rec, 'answerers', answerers)
end
if deferred == '1' then
  redis.call('HSET', rec, 'deferred', '1')
end
if tonumber(required) > 1 then
  redis.call('HSET', rec, 'req', required)
end
if pending_index then
  redis.call('ZADD', pending_index, 0, pending_member)
  redis.call('EXPIRE', pending_index, due_ttl) -- create is always indexed where this runs
  redis.call('ZADD', created_index, now, ask_id) -- `now` is the ask's created_at
  redis.call('EXPIRE', created_index, due_ttl)
end
redis.call('PEXPIRE', rec, ttl_ms)
event('created', 'null', detail)
if deferred == '0' and tonumber(lease_ms) > 0 then
  listen(waker, lease_ms)
end
if terms_channel ~= '' then
  -- the body holds the terms (bridge.store.ask_terms); sent before anyone can click it
  redis.call('PUBLISH', terms_channel, ask_id .. '\n' .. body)
end
return {'ok', 'pending'}
