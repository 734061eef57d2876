-- The right to show the ended ask's final state, once per interval: {'claimed', record} or
-- {'no'}; with `brief`, {'claimed', message, escalations ('' if none)}: the caller holds the ask
-- ended, which shows the same since, but for where it was posted. Run twice: the claim token
-- makes the re-sent claim granted again (lib/showing.lua). Indexed (the due index's key given)
-- only with a message: a failed render is then retried by a sweep.
local interval = ARGV[10] -- the render interval (s)
local token = ARGV[11] -- a token per claim
local message = ARGV[12] -- JSON ('' if none): where the claimant posted it
local detail = ARGV[13] -- the 'posted' event's
local unshown = ARGV[14] -- '1' to refuse an ask already shown (a sweep named it just before it
-- was)
local brief = ARGV[15] -- '1': answer where it was posted, not the record

if not indexed() then
  return {'missing'}
end
if redis.call('HGET', rec, 'status') == 'pending' then
  return {'no'}
end
if unshown == '1' and redis.call('HGET', rec, 'rendered') == '1' then
  return {'no'}
end
if not redis.call('HGET', rec, 'message') and message ~= '' then
  -- ended before set_message recorded where it was posted: the claimant knows
  redis.call('HSET', rec, 'message', message)
  event('posted', 'null', detail)
end
if not claim_showing(token, interval) then
  return {'no'}
end
if brief == '1' then
  return {'claimed', redis.call('HGET', rec, 'message'),
    redis.call('HGET', rec, 'escalations') or ''}
end
return {'claimed', record()}
