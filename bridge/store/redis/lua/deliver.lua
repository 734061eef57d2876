-- A stream entry names the ask: the first entry for an ask delivers it ({'deliver', record}), a
-- duplicate never ({'dup'}). Run twice: the same entry delivers it again.
local entry = ARGV[7] -- the entry id
local marker = ARGV[8] -- the field naming the entry that delivers the ask ('fed': the answers
-- feed, 'told_by': the ended-asks stream)

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
local field = marker or 'fed'
local fed = redis.call('HGET', rec, field)
if not fed then
  redis.call('HSET', rec, field, entry)
  return {'deliver', record()}
elseif fed == entry then
  return {'deliver', record()}
end
return {'dup'}
