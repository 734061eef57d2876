-- A form's answers (bridge.store.base.Store.submit_form). A pending ask's form is judged here as
-- bridge.judging.form_problems judges it: 'invalid', the record and a flat array of question
-- index, problem; nothing is recorded. Then the answers are built from the stored question set
-- (form_answers), one round trip per form, and recorded as submit.lua records one.
local name = ARGV[16] -- JSON
local groups_unknown = ARGV[17] -- '1': the caller can look up the person's groups (as pick's)
local form = ARGV[18] -- a JSON array of [question index, [option indices], typed text as kept
-- (what a person sees of it, trimmed, at most MAX_TYPED characters) or null when blank, true if
-- the typed text was longer] (bridge.judging.typed_text: the one rule for blank, applied
-- before this script, which only tells text from null)

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
local qs = cjson.decode(redis.call('HGET', rec, 'body')).questions.questions
local problems, got = {}, {}
for _, p in ipairs(cjson.decode(form)) do
  if p[1] < 0 or p[1] >= #qs then
    problems[#problems + 1] = p[1]
    problems[#problems + 1] = 'no_such_question'
  else
    got[p[1] + 1] = p
  end
end
local answers, kept, typed = {}, {}, false
for i, q in ipairs(qs) do
  local p = got[i]
  local chosen, n, outside, text, long = {}, 0, false, nil, false
  if p then
    for _, o in ipairs(p[2]) do
      if o < 0 or o >= #q.options then
        outside = true
      elseif not chosen[o] then
        chosen[o], n = true, n + 1
      end
    end
    if p[3] ~= cjson.null then
      text = p[3]
    end
    long = p[4] == true
  end
  local problem
  if outside then
    problem = 'no_such_option'
  elseif long then
    problem = 'too_long'
  elseif n == 0 and not text then
    problem = 'need_answer'
  elseif not q.multiSelect and n > 1 then
    problem = 'one_only'
  elseif not q.multiSelect and n > 0 and text then
    problem = 'not_both'
  end
  if problem then
    problems[#problems + 1] = i - 1
    problems[#problems + 1] = problem
  end
  local labels = {}
  for o = 0, #q.options - 1 do
    if chosen[o] then
      labels[#labels + 1] = jstr(q.options[o + 1].label)
    end
  end
  local other = text and jstr(text) or 'null'
  typed = typed or text ~= nil
  local selected = '"selected":[' .. table.concat(labels, ',') .. ']}'
  answers[i] = '{"other_text":' .. other .. ',"question":' .. jstr(q.question) .. ',' .. selected
  -- the audit trail's answers leave out the question (bridge.store.base.dump_answers)
  kept[i] = '{"other_text":' .. other .. ',' .. selected
end
if status == 'pending' and #problems > 0 then
  return {'invalid', record(), problems}
end
if groups_unknown == '1' and not allowed(key, authorising) then
  return {'groups', record()}
end
local detail = '{"name":' .. name .. ',"answers":[' .. table.concat(kept, ',') .. ']}'
return submit(status, key, authorising, responder, '[' .. table.concat(answers, ',') .. ']',
  user, detail, attempt, typed, verified)
