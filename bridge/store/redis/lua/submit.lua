-- A complete answer (bridge.store.base.Store.submit): recorded once, judged by submit (in
-- lib/submission.lua), whose verdicts are bridge.store.base.SubmitOutcome's. Run twice: the
-- attempt token makes the re-sent call's verdict the first one's.
local answers = ARGV[16] -- JSON
local detail = ARGV[17] -- the event's
local typed = ARGV[18] -- '1': the answers hold typed text

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
return submit(status, key, authorising, responder, answers, user, detail, attempt, typed == '1',
  verified)
