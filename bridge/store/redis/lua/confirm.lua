-- The waiting call returned the answer it took, or was woken with: nothing more to hand off (and
-- its descriptions go: the call's result echoed them). Replies {'ok', settled}. Run twice:
-- confirmed already.

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
local handoff = redis.call('HGET', rec, 'handoff')
if handoff == 'taken' or handoff == 'waiter' then
  redis.call('HSET', rec, 'handoff', 'confirmed')
  redis.call('DEL', lease)
  handoff = 'confirmed'
end
if handoff == 'confirmed' then
  undescribe()
end
return {'ok', tidy()}
