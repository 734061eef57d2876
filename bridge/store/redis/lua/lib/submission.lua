-- Recording a complete answer (submit.lua): who agrees on an ask that needs several people, and
-- the one step that accepts an answer (after lib/indexed.lua). It takes who submits, under which
-- attempt and what the ask's terms said of them first among its own ARGV
-- (bridge.store.redis.scripts.Submission), then what it submits. Who may answer is judged before
-- this script, by bridge.judging from the ask's terms (bridge.store.ask_terms.judge).
local key = ARGV[10] -- the submission's key: a user id, or a linked person's (bridge.identities)
local may = ARGV[11] -- '1': the submitter may answer, '0': refused
local responder = ARGV[12] -- JSON
local user = ARGV[13] -- JSON: the user id
local attempt = ARGV[14] -- a token per call
local rechecked = ARGV[15] -- '' or a JSON object: see record_submission

-- The user ids whose untyped submission is exactly `answers` (an ask needing several people),
-- sorted as Python sorts them (byte order of UTF-8 is code point order).
local function agreeing(answers)
  local found = {}
  local flat = redis.call('HGETALL', rec)
  for i = 1, #flat, 2 do
    if string.sub(flat[i], 1, 5) == 'subk:' and flat[i + 1] == answers then
      found[#found + 1] = string.sub(flat[i], 6)
    end
  end
  table.sort(found)
  return found
end

-- A submission whose person lost the authority that admitted it: marked withdrawn (its agreement
-- key made one no answer equals: 'W' .. key), shown, never counted; a lifecycle event.
local function withdraw(who)
  local key = redis.call('HGET', rec, 'subk:' .. who)
  if not key or string.sub(key, 1, 1) == 'W' then
    return
  end
  redis.call('HSET', rec, 'subk:' .. who, 'W' .. key, 'subw:' .. who, '1')
  local sub = cjson.decode(redis.call('HGET', rec, 'sub:' .. who))
  event('withdrawn', jstr(sub.user_id), '{"reason":"no longer allowed to answer"}')
end

-- An ask that needs `req` >= 2 agreeing people: record the person's submission (replacing
-- theirs) in sub:/subk:/suba: fields (bridge.store.keys.Fields). Returns a verdict reply when
-- the ask stays pending, or nil and the 'answered' event's detail (naming who agreed) when this
-- submission makes `req` equal untyped ones. A typed submission's key starts with 'T', so it
-- never equals an answers text (which starts with '[') and never agrees.
-- `rechecked` ('' : the caller cannot re-check authority; else a JSON object, key -> whether the
-- person still may answer, judged from their authorising ids as they are now): when this
-- submission would make `req` agree, each other one it would count must be in it -- else nothing
-- changes and the reply is {'verify', record, keys JSON} -- and one who no longer may answer is
-- withdrawn first (bridge.store.base.Store.submit; bridge.judging.recheck decides the same).
local function record_submission(required, user_id, answers, user_json, detail, attempt, typed,
    rechecked)
  local key = typed and ('T' .. answers) or answers
  if redis.call('HGET', rec, 'subk:' .. user_id) == key then
    -- this person's current submission again; its very attempt re-sent keeps its verdict
    if redis.call('HGET', rec, 'suba:' .. user_id) == attempt then
      return {'recorded', record()}
    end
    return {'repeated', record()}
  end
  if not typed and rechecked ~= '' then
    local others = {}
    for _, who in ipairs(agreeing(answers)) do
      if who ~= user_id then
        others[#others + 1] = who
      end
    end
    if #others + 1 >= required then
      local checked = cjson.decode(rechecked)
      local unverified = {}
      for _, who in ipairs(others) do
        if checked[who] == nil then
          unverified[#unverified + 1] = who
        end
      end
      if #unverified > 0 then
        return {'verify', record(), cjson.encode(unverified)}
      end
      for _, who in ipairs(others) do
        if checked[who] == false then
          withdraw(who)
        end
      end
    end
  end
  -- a person's first submission is lifecycle ('submitted'); each change of it is noise
  -- ('resubmitted', capped), so one person flipping their answer cannot grow the trail for ever
  local first = redis.call('HEXISTS', rec, 'subk:' .. user_id) == 0
  local sub = '{"at":' .. now .. ',"user_id":' .. user_json .. ',' .. string.sub(detail, 2)
  redis.call('HSET', rec, 'sub:' .. user_id, sub, 'subk:' .. user_id, key,
    'suba:' .. user_id, attempt)
  redis.call('HDEL', rec, 'subw:' .. user_id) -- submitted anew: judged anew
  local agreed = {}
  if not typed then
    agreed = agreeing(answers)
  end
  if #agreed < required then
    event(first and 'submitted' or 'resubmitted', user_json, detail)
    return {'recorded', record()}
  end
  for i, a in ipairs(agreed) do
    agreed[i] = jstr(a)
  end
  return nil, string.sub(detail, 1, -2) .. ',"agreed":[' .. table.concat(agreed, ',') .. ']}'
end

-- Record a complete answer once (the verdicts of bridge.store.base.SubmitOutcome); `may`: the
-- person may answer; `typed`: it holds typed text (only an ask needing several people cares).
local function submit(status, user_id, may, by_json, answers, user_json, detail, attempt, typed,
    rechecked)
  if status == 'pending' and expire_if_due() then
    -- no sweep will report this expiry: the caller re-renders the ask ('expired' -> CLOSED)
    event(may and 'late' or 'refused', user_json, detail)
    return {'expired', record()}
  end
  if not may then
    event('refused', user_json, detail)
    return {'not_allowed', record()}
  end
  if status == 'answered' then
    if redis.call('HGET', rec, 'slim') == '1' then
      answers = strip_questions(answers) -- settled: compared as it is kept (see tidy)
    end
    if redis.call('HGET', rec, 'answers') == answers then
      local by_me = redis.call('HGET', rec, 'by_user') == user_id
      if by_me or redis.call('HGET', rec, 'subk:' .. user_id) == answers then
        -- the accepting attempt re-sent (its reply was lost) is still that attempt
        if by_me and redis.call('HGET', rec, 'attempt') == attempt then
          return {'accepted', record()}
        end
        return {'repeated', record()} -- their answer is (among) the accepted
      end
    end
    event('late', user_json, detail)
    return {'already_answered', record()}
  elseif status ~= 'pending' then
    event('late', user_json, detail)
    return {'closed', record()}
  end
  local required = tonumber(redis.call('HGET', rec, 'req') or '1')
  if required > 1 then
    local pending_reply, answered_detail = record_submission(required, user_id, answers,
      user_json, detail, attempt, typed, rechecked)
    if pending_reply then
      return pending_reply
    end
    detail = answered_detail
  end
  redis.call('HSET', rec, 'answers', answers, 'by', by_json, 'by_user', user_id, 'at', now,
    'attempt', attempt)
  event('answered', user_json, detail, true)
  finish('answered')
  return {'accepted', record()}
end
