-- One click that answers (bridge.store.base.Store.pick): the answer is built here from the
-- stored question set, one round trip per click; then recorded as submit.lua records one.
local name = ARGV[16] -- JSON
local groups_unknown = ARGV[17] -- '1': the caller can look up the person's groups, so an
-- unnamed person is sent back for them ('groups') before anything is recorded
local question = ARGV[18] -- index, from 0
local option = ARGV[19] -- index, from 0

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
local qs = cjson.decode(redis.call('HGET', rec, 'body')).questions.questions
local q = qs[tonumber(question) + 1]
local chosen = q and q.options[tonumber(option) + 1]
if #qs ~= 1 or not q or q.multiSelect or not chosen then
  return {'invalid', record()}
end
if groups_unknown == '1' and not allowed(key, authorising) then
  return {'groups', record()}
end
local selected = '"selected":[' .. jstr(chosen.label) .. ']}]'
local answers = '[{"other_text":null,"question":' .. jstr(q.question) .. ',' .. selected
-- the audit trail's answers leave out the question (bridge.store.base.dump_answers)
local detail = '{"name":' .. name .. ',"answers":[{"other_text":null,' .. selected .. '}'
return submit(status, key, authorising, responder, answers, user, detail, attempt, false,
  verified)
