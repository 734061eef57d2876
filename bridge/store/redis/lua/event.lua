-- An event in the ask's audit trail (bridge.store.base.Store.record_event). Replies {'ok'}.
local kind = ARGV[7]
local user = ARGV[8] -- JSON: a user id or null
local detail = ARGV[9] -- JSON object

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
event(kind, user, detail)
return {'ok'}
