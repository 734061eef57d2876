-- A sweeper claims the ask's next due reminder or escalation (bridge.followups).
-- Replies: {'ended'} or {'done'} (nothing left: drop it from the timers index), {'later', t}
-- (visit again at t), {'busy', t} (another sweeper's claim, re-claimable at t: the caller may
-- only lower the score to t, as the claimant's timer_done may already have set the next step's
-- time), {'claimed', step, record} (post it, then 'timer_done'). Run twice: the claim token
-- makes the re-sent claim granted again.
local retry = ARGV[7] -- seconds after which a claim nobody marked done may be claimed again
local token = ARGV[8] -- a token per claim round
local tries = ARGV[9] -- claims of one step after which it is given up

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
if redis.call('HGET', rec, 'status') ~= 'pending' then
  return {'ended'}
end
local exp = tonumber(redis.call('HGET', rec, 'exp'))
if exp <= tonumber(now) then
  return {'ended'} -- the due index's sweep expires it
end
local unposted = not redis.call('HGET', rec, 'message')
local step, at = next_step(unposted)
if step ~= nil and at >= exp then
  step, at = nil, nil -- nothing is due at or after the expiry
end
if unposted and next_step(false) ~= nil then
  -- follow-ups wait for the post (its process may yet record it): look again in a while
  local again = tonumber(now) + tonumber(retry)
  if step == nil or at > again then
    step, at = nil, again
  end
end
if step == nil then
  return at and {'later', tostring(at)} or {'done'}
elseif at > tonumber(now) then
  return {'later', tostring(at)}
end
if redis.call('HGET', rec, 'timer_step') == step then
  if redis.call('HGET', rec, 'timer_by') == token then
    return {'claimed', step, record()} -- this claim re-sent
  end
  local last = tonumber(redis.call('HGET', rec, 'timer_at'))
  if tonumber(now) - last < tonumber(retry) then
    return {'busy', tostring(last + tonumber(retry))} -- claimed: its poster is at work
  end
  if tonumber(redis.call('HGET', rec, 'timer_tries')) >= tonumber(tries) then
    -- every claim died or failed to post: give the step up, so the next one can come
    local gave_up = '{"gave_up":true}'
    if step ~= 'escalate' then
      gave_up = '{"n":' .. string.sub(step, 8) .. ',"gave_up":true}'
    end
    step_done(step, '', gave_up)
    local after = next_step_at()
    return {'later', tostring(after or tonumber(now))}
  end
  redis.call('HINCRBY', rec, 'timer_tries', 1)
else
  redis.call('HSET', rec, 'timer_tries', 1)
end
redis.call('HSET', rec, 'timer_step', step, 'timer_at', now, 'timer_by', token)
return {'claimed', step, record()}
