-- A complete answer (bridge.store.base.Store.submit, pick and submit_form): recorded once,
-- judged by submit (in lib/submission.lua), whose verdicts are bridge.store.base.SubmitOutcome's.
-- The answers come built, and who may answer judged, by the store's template methods from the
-- ask's terms (bridge.store.ask_terms): this step decides only what depends on the ask as it
-- stands. Run twice: the attempt token makes the re-sent call's verdict the first one's.
local answers = ARGV[16] -- JSON: canonical (bridge.store.terms.dump_answers)
local detail = ARGV[17] -- the event's: the answers without their questions
local typed = ARGV[18] -- '1': the answers hold typed text
local invalid = ARGV[19] -- '1': a form with problems, refused ('invalid', nothing recorded)
-- while the ask is pending (an ended one judges it as any submission: a repeat, or late)

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
if invalid == '1' and status == 'pending' then
  return {'invalid', record()}
end
return submit(status, key, may == '1', responder, answers, user, detail, attempt, typed == '1',
  rechecked)
