-- Every state change of one ask, atomically. Key scheme and record fields: bridge/store/keys.py.
--
-- KEYS: 1 rec (hash), 2 log (list), 3 lease (string), 4 noise (list), 5 wake (set of the
--       wake-up channels of the processes waiting for it) -- one hash slot; except on Cluster
--       (another slot: the caller writes them itself), 6 the pending index, 7 the ended-asks
--       stream, 8 the created index and 9 the due index (see below).
-- ARGV: 1 op, 2 now (seconds, JSON number text), 3 shared events channel (only for a waiter
--       from before per-process channels), 4 ask id,
--       5 retention (ms), 6 noise cap; then the op's own arguments from ARGV[7].
-- Replies: {verdict, HGETALL of the record} (the record part is absent where noted; confirm, sent
-- and rendered answer {'ok', '1' if the ask is settled (see tidy) else '0'}).
-- Events are JSON built here from pre-encoded pieces (and strings written by jstr), so no JSON is
-- ever re-encoded by cjson.
-- Every op is safe to run twice with the same arguments (redis-py re-sends a command whose reply
-- was lost): the second run changes nothing and answers as the first did, or as a later caller
-- needs (see each op).

local rec, log, lease, noise, wakers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, now, channel, ask_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local retention_ms, noise_cap = tonumber(ARGV[5]), tonumber(ARGV[6])
local pending_index = KEYS[6] -- nil on Cluster
local ended_stream = KEYS[7] -- nil on Cluster
local created_index = KEYS[8] -- nil on Cluster
local RENDER_TRIES = 5 -- bridge.store.base.RENDER_TRIES
local NOISE = {refused = true, late = true, opened = true, resubmitted = true} -- base.NOISE_KINDS

local function record()
  return redis.call('HGETALL', rec)
end

-- Append to the audit trail: lifecycle events to log (never trimmed), noise to its capped list.
-- user_json is a JSON string or "null"; detail_json a JSON object. `ending`: finish() follows,
-- which gives the trail its retention (so its TTL is not matched to the record's here).
local function event(kind, user_json, detail_json, ending)
  local seq = redis.call('HINCRBY', rec, 'seq', 1)
  local line = '{"at":' .. now .. ',"seq":' .. seq .. ',"kind":"' .. kind .. '","user_id":'
    .. user_json .. ',"detail":' .. detail_json .. '}'
  local key = log
  if NOISE[kind] then
    key = noise
    local n = redis.call('RPUSH', noise, line)
    if n > noise_cap then
      redis.call('LTRIM', noise, -noise_cap, -1)
      redis.call('HINCRBY', rec, 'noise_dropped', n - noise_cap)
    end
  else
    redis.call('RPUSH', log, line)
  end
  if ending then
    return
  end
  local ttl = redis.call('PTTL', rec)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- A process waits for this ask: its wake-up channel joins the ask's wakers (for as long as the
-- record lives: a waiter whose lease lapsed -- its process stalled -- is still woken, and finds
-- its answer on the feed), and its lease lives ms more.
local function listen(waker, ms)
  redis.call('SADD', wakers, waker)
  local ttl = redis.call('PTTL', rec)
  if ttl > 0 then
    redis.call('PEXPIRE', wakers, ttl)
  end
  redis.call('SET', lease, '1', 'PX', ms)
end

-- Wake the processes that wait for this ask, and only them. A lease with no wakers is held by a
-- process from before per-process channels: it hears the shared channel.
-- An answer's wake-up carries the record (the id, a newline, HGETALL as a JSON array): the
-- waiting call returns it as is, one round trip sooner than a take would (confirm accepts
-- 'waiter' too). Any other ending's is the id alone, and the call takes the record: nobody waits
-- on an expiry's round trip, and a storm of expiries would send a process waiting for many of
-- them its records faster than it reads them (100,000 at once overran Redis's pub/sub output
-- buffer limit, which drops the subscription: its waiters are then all checked again).
local function wake(answered)
  local found = redis.call('SMEMBERS', wakers)
  local message = not answered and ask_id or nil
  for _, waker in ipairs(found) do
    -- a per-slot channel of a Cluster process ends in its hash tag: it lies in this script's
    -- slot, so it is SPUBLISHed there (heard on this node only); any other channel is plain,
    -- and the record is encoded only if someone listens on it: a process that stopped leaves its
    -- channel among the wakers of the asks it waited for (one that subscribes later re-reads the
    -- asks it waits for)
    if string.byte(waker, -1) == 125 then -- '}'
      message = message or ask_id .. '\n' .. cjson.encode(redis.call('HGETALL', rec))
      redis.call('SPUBLISH', waker, message)
    elseif message or redis.call('PUBSUB', 'NUMSUB', waker)[2] > 0 then
      message = message or ask_id .. '\n' .. cjson.encode(redis.call('HGETALL', rec))
      redis.call('PUBLISH', waker, message)
    end
  end
  if #found == 0 and redis.call('EXISTS', lease) == 1 then
    redis.call('PUBLISH', channel, ask_id)
  end
  redis.call('DEL', wakers)
end

-- The body, read once per call (an ending reads it for the platform and the descriptions).
local body_found
local function stored_body()
  if body_found == nil then
    body_found = redis.call('HGET', rec, 'body') or ''
  end
  return body_found
end

-- The platform the ask was posted to, read from the body without decoding it: the first
-- '"destination":{"platform":"' in it is the record's own (text inside a JSON string never holds
-- an unescaped quote). A plain find (memchr-fast; a pattern match tried every position of the
-- body, the dearest step of an expiry), once per call. '' if not found.
local platform_found
local function platform()
  if platform_found == nil then
    local body = stored_body()
    local _, at = string.find(body, '"destination":{"platform":"', 1, true)
    local stop = at and string.find(body, '"', at + 1, true)
    platform_found = stop and string.sub(body, at + 1, stop - 1) or ''
  end
  return platform_found
end

-- The ask no longer counts among the pending: its member '<platform>\0<id>' leaves the pending
-- index (bridge.store.keys.pending_member), its id the created index. On Cluster the caller
-- does it (other slots).
local function unpend()
  if pending_index then
    redis.call('ZREM', pending_index, platform() .. '\0' .. ask_id)
    redis.call('ZREM', created_index, ask_id)
  end
end

-- `text` (canonical JSON) without each string member '"<key>":"..."' that starts before
-- position `stop`, nor the comma joining it to the next member (or, for a last member, to the
-- one before). A '"<key>":"' can only be a key: inside a JSON string every quote is escaped.
local function drop_strings(text, key, stop)
  local out, from, opening = {}, 1, '"' .. key .. '":"'
  while true do
    local at, close = string.find(text, opening, from, true)
    if not at or at >= stop then
      break
    end
    repeat -- to the closing quote: the first one not escaped (after an even run of backslashes)
      close = string.find(text, '"', close + 1, true)
      local slashes = 0
      while string.byte(text, close - 1 - slashes) == 92 do
        slashes = slashes + 1
      end
    until slashes % 2 == 0
    if string.byte(text, close + 1) == 44 then -- a comma: drop it with the member
      out[#out + 1] = string.sub(text, from, at - 1)
      from = close + 2
    else -- the last member: drop the comma before it
      local before = at - 1
      if string.byte(text, before) == 44 then
        before = before - 1
      end
      out[#out + 1] = string.sub(text, from, before)
      from = close + 1
    end
  end
  out[#out + 1] = string.sub(text, from)
  return table.concat(out)
end

-- Canonical answers JSON without the question texts (each answer's '"question":"...",', which
-- answers question i of the body): what a settled ask keeps of its answers, as the audit trail
-- does (bridge.store.redis_codec puts the texts back when it reads the record). A 'T' prefix
-- (typed text, see record_submission) is kept as is.
local function strip_questions(answers)
  return drop_strings(answers, 'question', #answers + 1)
end

-- A body without its options' descriptions (only a person deciding and the outcome's hand-over
-- need them: every final state shows an ended ask without them, bridge.models.Option). Only in
-- the question set, which the body holds before its destination; the context after it is the
-- caller's own.
local function undescribed(body)
  local stop = string.find(body, ',"destination":{', 1, true)
  local found = stop and string.find(body, ',"description":"', 1, true)
  if found and found < stop then
    return drop_strings(body, 'description', stop)
  end
  return body
end

-- Drop them from the stored body once the outcome reached whoever gets it (the tool result echoes
-- the questions whole): when the waiting call confirms ('confirmed'), when its feed delivery is
-- acknowledged ('acked'), and when an ask is settled (tidy) with its hand-off done -- an ask that
-- ended with nobody to tell ('none'), or one a previous version ended keeping them.
local function undescribe()
  local body = stored_body()
  local bare = undescribed(body)
  if bare ~= body then
    redis.call('HSET', rec, 'body', bare)
    body_found = bare
  end
end

local tidy -- below: settling an ask that ends with nothing left to do (no message to show)

-- Leave "pending": decide who gets the outcome, wake waiters, start the retention clock. With
-- nobody to tell, what only a person deciding needs goes in this step if it has no message (it is
-- settled: at once, or on Cluster once told); else once its final state is shown (tidy) -- not in
-- this step, the whole of an expiry storm's, which would spend a third of it rebuilding bodies.
-- `closing`: the ask closes unanswered (expired, cancelled) now, which is recorded in the same
-- write. Returns the hand-off, told, and whether it has no message (so nothing to show).
local stream_kept = false -- the ended-asks stream was trimmed and its TTL set in this call
local function finish(status, closing)
  unpend()
  local handoff, deferred = 'none', '0'
  if redis.call('HGET', rec, 'deferred') == '1' then
    handoff = 'feed'
  elseif status == 'answered' then
    if redis.call('EXISTS', lease) == 1 then
      handoff = 'waiter'
    else
      handoff, deferred = 'feed', '1'
    end
  end
  -- On the ended-asks stream in this very step where the server allows it; on Cluster (another
  -- slot) 'told' '0': the caller adds it there, then runs 'told' (a sweep, should it die first).
  -- Trimmed by age (retention) on the server's clock, as the caller trims the feed: once per call
  -- (a sweep's call ends many asks).
  local told = '0'
  if ended_stream and stream_kept then
    redis.call('XADD', ended_stream, '*', 'ask', ask_id)
    told = '1'
  elseif ended_stream then
    local clock = redis.call('TIME')
    local minid = string.format('%d', tonumber(clock[1]) * 1000 - retention_ms)
    redis.call('XADD', ended_stream, 'MINID', '~', minid, '*', 'ask', ask_id)
    redis.call('PEXPIRE', ended_stream, retention_ms + 86400000)
    told, stream_kept = '1', true
  end
  local unposted = redis.call('HEXISTS', rec, 'message') == 0
  if handoff == 'none' and unposted then
    undescribe() -- settled already, or once told (on Cluster): it keeps no descriptions now
  end
  local fields = {'status', status, 'handoff', handoff, 'told', told}
  if deferred == '1' then
    fields[#fields + 1], fields[#fields + 2] = 'deferred', '1'
  end
  if closing then
    fields[#fields + 1], fields[#fields + 2] = 'closed_at', now
  end
  redis.call('HSET', rec, unpack(fields))
  redis.call('PEXPIRE', rec, retention_ms)
  redis.call('PEXPIRE', log, retention_ms)
  redis.call('PEXPIRE', noise, retention_ms)
  wake(status == 'answered')
  if handoff == 'none' and told == '1' and unposted then
    tidy() -- settled already: no sweep visits it again, nor anything else that would tidy it
  end
  return handoff, told, unposted
end

-- A pending ask past its expires_at (`exp`, read here unless the caller did) ends as expired (a
-- sweep's visit, or a late submission). Returns whether it did, and what finish returned.
local function expire_if_due(exp)
  if tonumber(exp or redis.call('HGET', rec, 'exp')) > tonumber(now) then
    return false
  end
  event('expired', 'null', '{}', true)
  return true, finish('expired', true)
end

local function allowed(user_id, groups_json)
  local answerers = cjson.decode(redis.call('HGET', rec, 'answerers') or '[]')
  if #answerers == 0 then
    return true
  end
  local set = {}
  for _, a in ipairs(answerers) do
    set[a] = true
  end
  if set[user_id] then
    return true
  end
  for _, g in ipairs(cjson.decode(groups_json)) do
    if set[g] then
      return true
    end
  end
  return false
end

-- The waiting call claims the outcome: a 'waiter' hand-off (or one it took already: a retry)
-- becomes 'taken', and the lease lives on until the call confirms (or its process dies).
local function take(lease_ms)
  local handoff = redis.call('HGET', rec, 'handoff')
  if handoff == 'waiter' or handoff == 'taken' then
    redis.call('HSET', rec, 'handoff', 'taken')
    redis.call('SET', lease, '1', 'PX', lease_ms)
    return {'taken', record()}
  end
  return {'other', record()}
end

-- Seconds until the sweeper should show the ended ask's final state (<= 0: now), or nil when
-- there is nothing to show: no message, already shown, or RENDER_TRIES claims spent.
local function show_in(interval)
  -- one read (a sweep of 100,000 expiries asks this of each)
  local f = redis.call('HMGET', rec, 'message', 'rendered', 'render_tries', 'at', 'closed_at',
    'render_at')
  if not f[1] or f[2] == '1' or tonumber(f[3] or '0') >= RENDER_TRIES then
    return nil
  end
  local since = tonumber(f[4] or f[5] or now)
  local claimed = tonumber(f[6] or '0')
  if claimed > since then
    since = claimed
  end
  return since + interval - tonumber(now)
end

-- A string as JSON, exactly as Python's json.dumps(s, ensure_ascii=False) writes it, so text
-- built here equals the canonical text Python builds (bridge.store.base.dump_answers).
local ESCAPES = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
  ['\b'] = '\\b', ['\f'] = '\\f'}
local function jstr(s)
  local escaped = string.gsub(s, '[%z\1-\31"\\]', function(c)
    return ESCAPES[c] or string.format('\\u%04x', string.byte(c))
  end)
  return '"' .. escaped .. '"'
end

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
-- `verified` ('' : the caller cannot re-check authority; else a JSON object, key -> the
-- person's authorising ids as they are now): when this submission would make `req` agree, each
-- other one it would count must be in it -- else nothing changes and the reply is
-- {'verify', record, keys JSON} -- and one whose ids no longer authorise it is withdrawn first
-- (bridge.store.base.Store.submit).
local function record_submission(required, user_id, answers, user_json, detail, attempt, typed,
    verified)
  local key = typed and ('T' .. answers) or answers
  if redis.call('HGET', rec, 'subk:' .. user_id) == key then
    -- this person's current submission again; its very attempt re-sent keeps its verdict
    if redis.call('HGET', rec, 'suba:' .. user_id) == attempt then
      return {'recorded', record()}
    end
    return {'repeated', record()}
  end
  if not typed and verified and verified ~= '' then
    local others = {}
    for _, who in ipairs(agreeing(answers)) do
      if who ~= user_id then
        others[#others + 1] = who
      end
    end
    if #others + 1 >= required then
      local checked = cjson.decode(verified)
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
        if not allowed(who, cjson.encode(checked[who])) then
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

-- Record a complete answer once (the verdicts of bridge.store.base.SubmitOutcome); `typed`: it
-- holds typed text (only an ask needing several people cares).
local function submit(status, user_id, groups_json, by_json, answers, user_json, detail, attempt,
    typed, verified)
  local may = allowed(user_id, groups_json)
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
      user_json, detail, attempt, typed, verified)
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

-- Whether nothing is left to do for the ask (it ended, its hand-off is settled, its final state
-- is shown or cannot be); then what only a pending ask needs is dropped, so an ended ask keeps
-- its audit trail and outcome for the retention and little else. (bridge.store.redis._settled)
-- The descriptions went when its outcome was handed over (finish, confirm); an ask a previous
-- version ended kept them: they go now (it is settled again by any op below that tidies) --
-- except on the feed ('sent'), whose delivery may not be acknowledged yet ('acked' drops them).
tidy = function()
  local handoff = redis.call('HGET', rec, 'handoff')
  if redis.call('HGET', rec, 'status') == 'pending'
      or (handoff ~= 'none' and handoff ~= 'sent' and handoff ~= 'confirmed')
      or redis.call('HGET', rec, 'told') == '0' or show_in(0) ~= nil then
    return '0'
  end
  unpend()
  redis.call('HDEL', rec, 'exp', 'attempt', 'render_by', 'reminded_at', 'timer_step', 'timer_at',
    'timer_by', 'timer_tries')
  if handoff ~= 'sent' then
    undescribe()
  end
  if redis.call('HGET', rec, 'status') == 'answered' and redis.call('HGET', rec, 'slim') ~= '1' then
    -- the answers (and each person's submission of an ask that needed several) keep no question
    -- texts: the body has them, and a late click is judged on the same slim form
    local fields = redis.call('HKEYS', rec)
    for _, field in ipairs(fields) do
      if field == 'answers' or string.sub(field, 1, 5) == 'subk:' then
        redis.call('HSET', rec, field, strip_questions(redis.call('HGET', rec, field)))
      end
    end
    redis.call('HSET', rec, 'slim', '1')
  end
  if redis.call('HEXISTS', rec, 'req') == 1 then
    -- an ask that needed several people keeps every submission ('sub:'), but no attempt tokens
    -- ('suba:', for retries while pending) and only the agreement keys a late click compares:
    -- those equal to the accepted answers (a repeat of theirs stands)
    local status, answers = redis.call('HGET', rec, 'status'), redis.call('HGET', rec, 'answers')
    for _, field in ipairs(redis.call('HKEYS', rec)) do
      local kind = string.sub(field, 1, 5)
      if kind == 'suba:' or (kind == 'subk:'
          and (status ~= 'answered' or redis.call('HGET', rec, field) ~= answers)) then
        redis.call('HDEL', rec, field) -- one by one: anyone may answer, unpack() has a limit
      end
    end
  end
  return '1'
end

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

-- A sweeper's visit to the ask: hold is the seconds until a held hand-off is checked again,
-- interval the render interval (s). An ask to show or feed is answered {verdict, its platform,
-- its hand-off, '1' if settled, '1' if on the ended-asks stream (else the caller adds it, then
-- 'told')}, not with its record: a storm's sweep reads 100,000 of these. 'done' gives the
-- platform too. One read of the fields that decide it: an expiry is most of a storm's work.
local function settle(hold, interval)
  local f = redis.call('HMGET', rec, 'status', 'exp', 'told', 'handoff')
  local status, told, handoff = f[1], f[3], f[4]
  if not status then
    return {'missing'}
  end
  local function visited(verdict, unshown)
    -- unshown: nothing to show, known already (an expiry here: shown if and only if posted)
    local settled = (handoff == 'none' or handoff == 'sent' or handoff == 'confirmed')
      and told ~= '0' and (unshown or unshown == nil and show_in(0) == nil)
    return {verdict, platform(), handoff, settled and '1' or '0', told ~= '0' and '1' or '0'}
  end
  if status == 'pending' then
    local expired, unposted
    expired, handoff, told, unposted = expire_if_due(f[2])
    if expired then
      return visited('expired', unposted)
    end
    return {'later', f[2]}
  end
  if told == '0' then
    return visited('tell') -- its ender died before adding it to the ended-asks stream
  end
  if handoff == 'waiter' or handoff == 'taken' then
    if redis.call('EXISTS', lease) == 1 then
      return {'later', tostring(tonumber(now) + tonumber(hold))}
    end
    -- nobody took it, or the taker died before confirming: the feed delivers it
    redis.call('HSET', rec, 'handoff', 'feed', 'deferred', '1')
    event('handed_to_feed', 'null', '{}')
    handoff = 'feed'
    return visited('feed')
  elseif handoff == 'feed' then
    return visited('feed')
  end
  local wait = show_in(tonumber(interval))
  if wait == nil then
    tidy()
    -- on Cluster the caller drops the ask from the pending index (a repair: normally whoever
    -- ended it did)
    return {'done', platform()}
  elseif wait > 0 then
    return {'later', tostring(tonumber(now) + wait)}
  end
  return visited('show')
end

-- A 9th key is the due index (never on Cluster, where it lives in another slot and the caller
-- writes it itself, before the script): then the last three ARGV are the ask's score there, how
-- to set it ('nx', 'xx' or '') and the index's TTL in seconds -- written first, as the caller
-- would have, so an ask is never pending yet unswept.
if #KEYS == 9 then
  local score, mode, ttl = ARGV[#ARGV - 2], ARGV[#ARGV - 1], ARGV[#ARGV]
  if mode == '' then
    redis.call('ZADD', KEYS[9], score, ask_id)
  else
    redis.call('ZADD', KEYS[9], mode, score, ask_id)
  end
  if mode ~= 'xx' then
    redis.call('EXPIRE', KEYS[9], ttl)
  end
end

-- A sweep's visits, answered with one reply per ask. On Cluster, the one ask of KEYS. Elsewhere
-- a batch in one call (the per-call setup of this script is a good part of a visit's cost): KEYS
-- 1-5 and 9 on are the asks' keys, five each (6 to 8 as always), ARGV 4 and 9 on their ids;
-- ARGV 7 and 8 are settle's hold and interval. Each visit is as the ask's own call would be.
if op == 'settle' then
  local replies = {settle(ARGV[7], ARGV[8])}
  for i = 2, (#KEYS - 3) / 5 do
    local k = 9 + (i - 2) * 5
    rec, log, lease, noise, wakers = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
    ask_id, body_found, platform_found = ARGV[7 + i], nil, nil
    replies[i] = settle(ARGV[7], ARGV[8])
  end
  return replies
end

local exists = redis.call('EXISTS', rec) == 1

if op == 'create' then
  -- 7 body, 8 expires_at, 9 answerers, 10 deferred, 11 ttl ms, 12 lease ms, 13 event detail,
  -- 14 the creating process's wake-up channel (it is about to wait), 15 people required to
  -- agree (stored as 'req' only when more than one: a one-person ask reads no more),
  -- 16 its member in the pending index ('<platform>\0<id>', as unpend() spells it); replies
  -- the status
  if exists then
    -- the same ask again is a retry of this create; another one under that id is a duplicate
    local body = redis.call('HGET', rec, 'body')
    local same = body == ARGV[7] or body == undescribed(ARGV[7]) -- ended: kept without them
    return {same and 'ok' or 'exists', redis.call('HGET', rec, 'status')}
  end
  -- a field at its default is not stored (each costs ~50 bytes of every pending ask): no
  -- 'answerers' when anyone may answer, no 'deferred' unless deferred, no 'handoff' yet
  redis.call('HSET', rec, 'body', ARGV[7], 'status', 'pending', 'exp', ARGV[8])
  if ARGV[9] ~= '[]' then
    redis.call('HSET', rec, 'answerers', ARGV[9])
  end
  if ARGV[10] == '1' then
    redis.call('HSET', rec, 'deferred', '1')
  end
  if tonumber(ARGV[15]) > 1 then
    redis.call('HSET', rec, 'req', ARGV[15])
  end
  if pending_index then
    redis.call('ZADD', pending_index, 0, ARGV[16])
    redis.call('EXPIRE', pending_index, ARGV[#ARGV]) -- the due index's TTL (create indexes it)
    redis.call('ZADD', created_index, now, ask_id) -- `now` is the ask's created_at
    redis.call('EXPIRE', created_index, ARGV[#ARGV])
  end
  redis.call('PEXPIRE', rec, ARGV[11])
  event('created', 'null', ARGV[13])
  if ARGV[10] == '0' and tonumber(ARGV[12]) > 0 then
    listen(ARGV[14], ARGV[12])
  end
  return {'ok', 'pending'}
end

if not exists then
  return {'missing'}
end
local status = redis.call('HGET', rec, 'status')

if op == 'message' then
  -- 7 message JSON, 8 event detail, 9 '1': the record only if the ask is no longer pending, or
  -- needs several people (the call that posted it needs it only then: to show an ending, or
  -- submissions, that a click made before the message was known; a wave of 1,000 posts would
  -- parse 1,000 records)
  if redis.call('HGET', rec, 'message') ~= ARGV[7] then
    redis.call('HSET', rec, 'message', ARGV[7])
    event('posted', 'null', ARGV[8])
  end
  if ARGV[9] == '1' and status == 'pending' and redis.call('HEXISTS', rec, 'req') == 0 then
    return {'ok'}
  end
  return {'ok', record()}
elseif op == 'index_created' then
  -- an ask a version before the created index made (it wrote only the pending index) joins
  -- it, while pending; answers {status, its created_at} (on Cluster the caller indexes it).
  -- The body's own created_at is its last '"created_at":' (a key the caller's free-form
  -- context may hold too comes before it; no field after it holds one).
  local body, at, from = stored_body(), nil, 1
  repeat
    local _, stop = string.find(body, '"created_at":', from, true)
    if stop then
      at, from = stop, stop + 1
    end
  until not stop
  local created_at = at and string.match(body, '^[-0-9.eE+]+', at + 1)
  if not created_at then
    return {status, ''}
  end
  if status == 'pending' and created_index then
    redis.call('ZADD', created_index, created_at, ask_id)
  end
  return {status, created_at}
elseif op == 'event' then
  -- 7 kind, 8 user JSON, 9 detail
  event(ARGV[7], ARGV[8], ARGV[9])
  return {'ok'}
elseif op == 'submit' then
  -- 7 submission key (a user id, or a linked person's: bridge.identities), 8 authorising ids
  -- JSON (groups, and the person's ids besides the key), 9 responder JSON, 10 answers JSON,
  -- 11 user JSON, 12 detail, 13 attempt token, 14 '1': the answers hold typed text,
  -- 15 verified authority ('' or a JSON object: see record_submission)
  return submit(status, ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13],
    ARGV[14] == '1', ARGV[15])
elseif op == 'pick' then
  -- 7 submission key, 8 authorising ids JSON (as submit's), 9 responder JSON, 10 question
  -- index, 11 option index (from 0), 12 user JSON, 13 name JSON, 14 attempt token, 15 '1': the
  -- caller can look up the person's groups, so an unnamed person is sent back for them
  -- ('groups') before anything is recorded, 16 verified authority (as submit's 15).
  -- The answer is built here from the stored question set: one round trip per click.
  local qs = cjson.decode(redis.call('HGET', rec, 'body')).questions.questions
  local q = qs[tonumber(ARGV[10]) + 1]
  local option = q and q.options[tonumber(ARGV[11]) + 1]
  if #qs ~= 1 or not q or q.multiSelect or not option then
    return {'invalid', record()}
  end
  if ARGV[15] == '1' and not allowed(ARGV[7], ARGV[8]) then
    return {'groups', record()}
  end
  local selected = '"selected":[' .. jstr(option.label) .. ']}]'
  local answers = '[{"other_text":null,"question":' .. jstr(q.question) .. ',' .. selected
  -- the audit trail's answers leave out the question (bridge.store.base.dump_answers)
  local detail = '{"name":' .. ARGV[13] .. ',"answers":[{"other_text":null,' .. selected .. '}'
  return submit(status, ARGV[7], ARGV[8], ARGV[9], answers, ARGV[12], detail, ARGV[14], false,
    ARGV[16])
elseif op == 'form' then
  -- 7 user id, 8 groups JSON, 9 responder JSON, 10 the form: a JSON array of [question index,
  -- [option indices], typed text as kept (what a person sees of it, trimmed, at most MAX_TYPED
  -- characters) or null when blank, true if the typed text was longer]
  -- (bridge.store.base.typed_text: the one rule for blank, applied before this script, which
  -- only tells text from null), 11 user JSON, 12 name JSON,
  -- 13 attempt token, 14 '1': the caller can look up the person's groups (as pick's),
  -- 15 verified authority (as submit's 15).
  -- A pending ask's form is judged here as bridge.store.base.form_problems judges it: 'invalid',
  -- the record and a flat array of question index, problem; nothing is recorded. Then the
  -- answers are built from the stored question set (form_answers): one round trip per form.
  local qs = cjson.decode(redis.call('HGET', rec, 'body')).questions.questions
  local problems, got = {}, {}
  for _, p in ipairs(cjson.decode(ARGV[10])) do
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
  if ARGV[14] == '1' and not allowed(ARGV[7], ARGV[8]) then
    return {'groups', record()}
  end
  local detail = '{"name":' .. ARGV[12] .. ',"answers":[' .. table.concat(kept, ',') .. ']}'
  return submit(status, ARGV[7], ARGV[8], ARGV[9], '[' .. table.concat(answers, ',') .. ']',
    ARGV[11], detail, ARGV[13], typed, ARGV[15])
elseif op == 'close' then
  -- 7 status (expired|cancelled), 8 user JSON (who closed it, or null)
  if status == ARGV[7] then
    return {'closed', record()} -- a retry, or ended so already: the caller shows it all the same
  elseif status ~= 'pending' then
    return {'not_pending', record()}
  end
  event(ARGV[7], ARGV[8], '{}', true)
  finish(ARGV[7], true)
  return {'closed', record()}
elseif op == 'defer' then
  -- 7 lease ms (for a take)
  if status == 'pending' then
    if redis.call('HGET', rec, 'deferred') ~= '1' then
      redis.call('HSET', rec, 'deferred', '1')
      redis.call('DEL', lease)
      event('deferred', 'null', '{}')
    end
    return {'deferred', record()}
  end
  return take(ARGV[7])
elseif op == 'take' then
  -- 7 lease ms
  return take(ARGV[7])
elseif op == 'watch' then
  -- a call starts waiting (or its process re-subscribed): 7 lease ms, 8 its wake-up channel
  if status == 'pending' then
    listen(ARGV[8], ARGV[7])
  else
    redis.call('SET', lease, '1', 'PX', ARGV[7])
  end
  return {status}
elseif op == 'observe' then
  -- an observer starts watching (Store.observe): 7 its wake-up channel; no lease, no take
  if status == 'pending' then
    redis.call('SADD', wakers, ARGV[7])
    local ttl = redis.call('PTTL', rec)
    if ttl > 0 then
      redis.call('PEXPIRE', wakers, ttl)
    end
  end
  return {status}
elseif op == 'confirm' then
  -- the waiting call returned the answer it took, or was woken with: nothing more to hand off
  -- (and its descriptions go: the call's result echoed them)
  local handoff = redis.call('HGET', rec, 'handoff')
  if handoff == 'taken' or handoff == 'waiter' then
    redis.call('HSET', rec, 'handoff', 'confirmed')
    redis.call('DEL', lease)
    handoff = 'confirmed'
  end
  if handoff == 'confirmed' then
    undescribe()
  end
  return {'ok', tidy()}
elseif op == 'release' then
  -- the waiting call is gone (cancelled) without returning anything: an answer handed to it
  -- ('waiter') or taken by it -- even confirmed -- whose reply it never read goes to the feed
  redis.call('DEL', lease)
  local handoff = redis.call('HGET', rec, 'handoff')
  if handoff == 'waiter' or handoff == 'taken' or handoff == 'confirmed' then
    redis.call('HSET', rec, 'handoff', 'feed', 'deferred', '1')
    event('handed_to_feed', 'null', '{}')
    return {'feed', record()}
  end
  return {'other'}
elseif op == 'sent' then
  if redis.call('HGET', rec, 'handoff') == 'feed' then
    redis.call('HSET', rec, 'handoff', 'sent')
  end
  return {'ok', tidy()}
elseif op == 'told' then
  -- the ask is on the ended-asks stream
  if redis.call('HGET', rec, 'told') == '0' then
    redis.call('HSET', rec, 'told', '1')
  end
  return {'ok', tidy()}
elseif op == 'deliver' then
  -- 7 entry id, 8 the field naming the entry that delivers the ask ('fed': the answers feed,
  -- 'told_by': the ended-asks stream): the first entry for an ask delivers it, a duplicate never
  local field = ARGV[8] or 'fed'
  local fed = redis.call('HGET', rec, field)
  if not fed then
    redis.call('HSET', rec, field, ARGV[7])
    return {'deliver', record()}
  elseif fed == ARGV[7] then
    return {'deliver', record()}
  end
  return {'dup'}
elseif op == 'acked' then
  -- 7 entry id: the answers feed's delivery of the ask was acknowledged; if it is the entry that
  -- delivers it (deliver's 'fed'), the outcome reached its reader and the descriptions go
  if redis.call('HGET', rec, 'fed') == ARGV[7] then
    undescribe()
  end
  return {'ok'}
elseif op == 'claim' then
  -- 7 render interval (s), 8 claim token, 9 message JSON ('' if none), 10 its event detail,
  -- 11 '1' to refuse an ask already shown (a sweep named it just before it was): the right to
  -- show the final state, once per interval
  if status == 'pending' then
    return {'no'}
  end
  if ARGV[11] == '1' and redis.call('HGET', rec, 'rendered') == '1' then
    return {'no'}
  end
  if not redis.call('HGET', rec, 'message') and ARGV[9] ~= '' then
    -- ended before set_message recorded where it was posted: the claimant knows
    redis.call('HSET', rec, 'message', ARGV[9])
    event('posted', 'null', ARGV[10])
  end
  if not redis.call('HGET', rec, 'message') then
    return {'no'}
  end
  if redis.call('HGET', rec, 'render_by') == ARGV[8] then
    return {'claimed', record()} -- this claim re-sent
  end
  local last = redis.call('HGET', rec, 'render_at')
  if last and tonumber(now) - tonumber(last) < tonumber(ARGV[7]) then
    return {'no'}
  end
  redis.call('HSET', rec, 'render_at', now, 'render_by', ARGV[8])
  redis.call('HINCRBY', rec, 'render_tries', 1)
  return {'claimed', record()}
elseif op == 'rendered' then
  if status ~= 'pending' and redis.call('HGET', rec, 'rendered') ~= '1' then
    redis.call('HSET', rec, 'rendered', '1')
    event('rendered', 'null', '{}')
  end
  return {'ok', tidy()}
elseif op == 'timer' then
  -- a sweeper claims the ask's next due reminder or escalation (bridge.followups):
  -- 7 seconds after which a claim nobody marked done may be claimed again, 8 claim token,
  -- 9 claims of one step after which it is given up.
  -- Replies: {'ended'} or {'done'} (nothing left: drop it from the timers index), {'later', t}
  -- (visit again at t), {'busy', t} (another sweeper's claim, re-claimable at t: the caller
  -- may only lower the score to t, as the claimant's timer_done may already have set the next
  -- step's time), {'claimed', step, record} (post it, then 'timer_done').
  if status ~= 'pending' then
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
    local again = tonumber(now) + tonumber(ARGV[7])
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
    if redis.call('HGET', rec, 'timer_by') == ARGV[8] then
      return {'claimed', step, record()} -- this claim re-sent
    end
    local last = tonumber(redis.call('HGET', rec, 'timer_at'))
    if tonumber(now) - last < tonumber(ARGV[7]) then
      return {'busy', tostring(last + tonumber(ARGV[7]))} -- claimed: its poster is at work
    end
    if tonumber(redis.call('HGET', rec, 'timer_tries')) >= tonumber(ARGV[9]) then
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
  redis.call('HSET', rec, 'timer_step', step, 'timer_at', now, 'timer_by', ARGV[8])
  return {'claimed', step, record()}
elseif op == 'timer_done' then
  -- the claimed step was posted: 7 step, 8 the escalation's message JSON ('' for a reminder),
  -- 9 event detail. Also for an ask that ended meanwhile: the escalation's message is recorded,
  -- and its final state is due to be shown again (on every message).
  -- Reply: {'ok', next due time or '', record}
  local was_done = step_finished(ARGV[7])
  if not was_done then
    step_done(ARGV[7], ARGV[8], ARGV[9])
    if status ~= 'pending' and ARGV[8] ~= '' then
      redis.call('HDEL', rec, 'rendered')
      redis.call('HSET', rec, 'render_tries', 0)
    end
  end
  local after = status == 'pending' and next_step_at() or nil
  return {'ok', after and tostring(after) or '', record()}
end
return redis.error_reply('ask.lua: unknown op ' .. tostring(op))
