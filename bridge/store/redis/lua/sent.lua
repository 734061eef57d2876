-- The ask is on the answers feed. Replies {'ok', settled}.

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
return stepped('handoff', 'feed', 'sent')
