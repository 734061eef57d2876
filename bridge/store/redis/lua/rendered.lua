-- The ended ask's final state is shown. Replies {'ok', settled}. Run twice: no second event.
-- Settled, the ask leaves the due index here where the index is this script's (never on
-- Cluster: the caller drops it), so no sweep visits it for nothing (the call comes with no
-- place in the index: lib/indexed.lua's ARGV are not read).

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
if status ~= 'pending' and redis.call('HGET', rec, 'rendered') ~= '1' then
  redis.call('HSET', rec, 'rendered', '1')
  event('rendered', 'null', '{}')
end
local settled = tidy()
if settled == '1' and due_index then
  redis.call('ZREM', due_index, ask_id)
end
return {'ok', settled}
