-- The claimed step was posted; also for an ask that ended meanwhile: the escalation's message
-- is recorded, and its final state is due to be shown again (on every message). Reply:
-- {'ok', next due time or '', record}. Run twice: the step is done already, nothing changes.
local step = ARGV[7] -- 'escalate' or 'remind:<n>'
local message = ARGV[8] -- the escalation's message JSON ('' for a reminder)
local detail = ARGV[9] -- the event's

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
local was_done = step_finished(step)
if not was_done then
  step_done(step, message, detail)
  if status ~= 'pending' and message ~= '' then
    redis.call('HDEL', rec, 'rendered')
    redis.call('HSET', rec, 'render_tries', 0)
  end
end
local after = status == 'pending' and next_step_at() or nil
return {'ok', after and tostring(after) or '', record()}
