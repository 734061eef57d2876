-- The ask is on the ended-asks stream. Replies {'ok', settled}.

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
return stepped('told', '0', '1')
