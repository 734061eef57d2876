-- The answers go to the feed, not to a waiting call ({'deferred', record}); an ask that ended
-- already is taken as take.lua takes it. Run twice: deferred already, no second event.
local lease_ms = ARGV[7] -- for a take

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
if redis.call('HGET', rec, 'status') == 'pending' then
  if redis.call('HGET', rec, 'deferred') ~= '1' then
    redis.call('HSET', rec, 'deferred', '1')
    redis.call('DEL', lease)
    event('deferred', 'null', '{}')
  end
  return {'deferred', record()}
end
return take(lease_ms)
