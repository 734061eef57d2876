-- The answers feed's delivery of the ask was acknowledged; if it is the entry that delivers it
-- (deliver.lua's 'fed'), the outcome reached its reader and the descriptions go. Replies {'ok'}.
local entry = ARGV[7] -- the entry id

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
if redis.call('HGET', rec, 'fed') == entry then
  undescribe()
end
return {'ok'}
