-- Reminders and escalation (bridge.followups; the same rules as bridge.store.memory): the
-- follow-ups fixed at creation are in the body; 'reminded' counts the reminders posted,
-- 'reminded_at' is when the last was, 'escalated' is '1' once the escalation was posted (or
-- given up). The escalation is due escalate_after seconds after creation; reminder n+1
-- remind_after seconds after reminder n (the first after creation), up to remind_times.
local function follow_ups()
  local body = cjson.decode(redis.call('HGET', rec, 'body'))
  local fu = body.follow_ups
  if type(fu) ~= 'table' then
    return nil, 0
  end
  return fu, tonumber(body.created_at)
end

-- The next step not yet done and when it is due: 'escalate' or 'remind:<n>', or nil;
-- nothing when the ask is not posted yet (bridge.followups.next_step says why).
local function next_step(unposted)
  local fu, created = follow_ups()
  if fu == nil or unposted then
    return nil, nil -- nothing follows an ask nobody was shown (bridge.followups.next_step)
  end
  local best, best_at = nil, nil
  if type(fu.escalate_after) == 'number' and redis.call('HGET', rec, 'escalated') ~= '1' then
    best, best_at = 'escalate', created + fu.escalate_after
  end
  local reminded = tonumber(redis.call('HGET', rec, 'reminded') or '0')
  if type(fu.remind_after) == 'number' and reminded < fu.remind_times then
    local since = tonumber(redis.call('HGET', rec, 'reminded_at') or created)
    local at = since + fu.remind_after
    if best_at == nil or at < best_at then
      best, best_at = 'remind:' .. (reminded + 1), at
    end
  end
  return best, best_at
end

local function next_step_at()
  local _, at = next_step(false)
  return at
end

-- Whether the step was done already (posted, or given up).
local function step_finished(step)
  if step == 'escalate' then
    return redis.call('HGET', rec, 'escalated') == '1'
  end
  return tonumber(redis.call('HGET', rec, 'reminded') or '0') >= tonumber(string.sub(step, 8))
end

-- Mark the step done, with its event ('reminded' {"n": ...} or 'escalated' {"to": ...}) and,
-- for an escalation that was posted, its message among the ask's escalations.
local function step_done(step, message, detail)
  if step == 'escalate' then
    redis.call('HSET', rec, 'escalated', '1')
    if message ~= '' then
      local list = redis.call('HGET', rec, 'escalations')
      if list and list ~= '[]' then
        list = string.sub(list, 1, -2) .. ',' .. message .. ']'
      else
        list = '[' .. message .. ']'
      end
      redis.call('HSET', rec, 'escalations', list)
    end
    event('escalated', 'null', detail)
  else
    redis.call('HSET', rec, 'reminded', string.sub(step, 8), 'reminded_at', now)
    event('reminded', 'null', detail)
  end
  redis.call('HDEL', rec, 'timer_step', 'timer_at', 'timer_by', 'timer_tries')
end
