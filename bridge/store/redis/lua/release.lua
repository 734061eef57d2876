-- The waiting call is gone (cancelled) without returning anything: an answer handed to it
-- ('waiter') or taken by it -- even confirmed -- whose reply it never read goes to the feed
-- ({'feed', record}; else {'other'}). Run twice: on the feed already, 'other'.
if not indexed() then
  return {'missing'}
end
redis.call('DEL', lease)
local handoff = redis.call('HGET', rec, 'handoff')
if handoff == 'waiter' or handoff == 'taken' or handoff == 'confirmed' then
  redis.call('HSET', rec, 'handoff', 'feed', 'deferred', '1')
  event('handed_to_feed', 'null', '{}')
  return {'feed', record()}
end
return {'other'}
