-- Where the ask was posted. Replies {'ok', record}; or {'ok'} alone when `brief` and the record
-- is not needed: the call that posted it needs it only if the ask is no longer pending, or needs
-- several people (to show an ending, or submissions, that a click made before the message was
-- known; a wave of 1,000 posts would parse 1,000 records). Run twice: the message is already
-- recorded, no second 'posted' event.
local message = ARGV[10] -- JSON
local detail = ARGV[11] -- the 'posted' event's
local brief = ARGV[12] -- '1': the record only when needed (see above)

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
if redis.call('HGET', rec, 'message') ~= message then
  redis.call('HSET', rec, 'message', message)
  event('posted', 'null', detail)
end
if brief == '1' and status == 'pending' and redis.call('HEXISTS', rec, 'req') == 0 then
  return {'ok'}
end
return {'ok', record()}
