-- The ended ask's final state is shown. Replies {'ok', settled}. Run twice: no second event.

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
if status ~= 'pending' and redis.call('HGET', rec, 'rendered') ~= '1' then
  redis.call('HSET', rec, 'rendered', '1')
  event('rendered', 'null', '{}')
end
return {'ok', tidy()}
