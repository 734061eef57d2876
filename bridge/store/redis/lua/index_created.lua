-- An ask a version before the created index made (it wrote only the pending index) joins it,
-- while pending; answers {status, its created_at} (on Cluster the caller indexes it). The body's
-- own created_at is its last '"created_at":' (a key the caller's free-form context may hold too
-- comes before it; no field after it holds one). Run twice: the same ZADD.

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
local body, at, from = stored_body(), nil, 1
repeat
  local _, stop = string.find(body, '"created_at":', from, true)
  if stop then
    at, from = stop, stop + 1
  end
until not stop
local created_at = at and string.match(body, '^[-0-9.eE+]+', at + 1)
if not created_at then
  return {status, ''}
end
if status == 'pending' and created_index then
  redis.call('ZADD', created_index, created_at, ask_id)
end
return {status, created_at}
