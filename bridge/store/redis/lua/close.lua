-- Close a pending ask unanswered (expired or cancelled). Replies {'closed', record}, or
-- {'not_pending', record} when it ended otherwise. Run twice (or ended so already): 'closed'
-- again, and the caller shows it all the same.
local closed_as = ARGV[10] -- expired|cancelled
local by = ARGV[11] -- JSON: who closed it, or null

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
if status == closed_as then
  return {'closed', record()} -- a retry, or ended so already: the caller shows it all the same
elseif status ~= 'pending' then
  return {'not_pending', record()}
end
event(closed_as, by, '{}', true)
finish(closed_as, true)
return {'closed', record()}
