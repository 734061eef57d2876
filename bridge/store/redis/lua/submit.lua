-- A complete answer (bridge.store.base.Store.submit, pick and submit_form): recorded once,
-- judged by submit (in lib/submission.lua), whose verdicts are bridge.store.base.SubmitOutcome's.
-- The answers come built, and who may answer judged, by the store's template methods from the
-- ask's terms (bridge.store.ask_terms): this step decides only what depends on the ask as it
-- stands. Run twice: the attempt token makes the re-sent call's verdict the first one's (and its
-- claim, lib/showing.lua, granted again). A verdict that claimed the showing of the ended ask's
-- final state adds 'claimed' after the record.
local answers = ARGV[16] -- JSON: canonical (bridge.store.terms.dump_answers)
local detail = ARGV[17] -- the event's: the answers without their questions
local typed = ARGV[18] -- '1': the answers hold typed text
local invalid = ARGV[19] -- '1': a form with problems, refused ('invalid', nothing recorded)
-- while the ask is pending (an ended one judges it as any submission: a repeat, or late)
local show = ARGV[20] -- the render interval (s): claim the showing of the ask's final state
-- should it have ended (the caller shows it); '' : claim nothing

if not indexed() then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')
if invalid == '1' and status == 'pending' then
  return {'invalid', record()}
end
local reply = submit(status, key, may == '1', responder, answers, user, detail, attempt,
  typed == '1', rechecked)
if show ~= '' and reply[1] ~= 'verify' and claim_showing(attempt, show) then
  reply[3] = 'claimed'
end
return reply
