-- The helpers every op's script holds (after lib/header.lua): reading and writing the record, its
-- audit trail and wake-ups, ending and settling an ask.

local function record()
  return redis.call('HGETALL', rec)
end

-- `key` (the audit trail's, the wakers') expires with the record: nothing outlives the ask.
local function with_record(key)
  local ttl = redis.call('PTTL', rec)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Append to the audit trail: lifecycle events to log (never trimmed), noise to its capped list.
-- user_json is a JSON string or "null"; detail_json a JSON object. `ending`: finish() follows,
-- which gives the trail its retention (so its TTL is not matched to the record's here). `seq`:
-- the event's number when the caller read the counter and stores it itself (an expiry: finish()
-- writes it with the ending's other fields), else counted here. Returns the lifecycle list's
-- length after a lifecycle event (nil after noise).
local function event(kind, user_json, detail_json, ending, seq)
  seq = seq or redis.call('HINCRBY', rec, 'seq', 1)
  local line = '{"at":' .. now .. ',"seq":' .. seq .. ',"kind":"' .. kind .. '","user_id":'
    .. user_json .. ',"detail":' .. detail_json .. '}'
  local key, logged = log, nil
  if NOISE[kind] then
    key = noise
    local n = redis.call('RPUSH', noise, line)
    if n > noise_cap then
      redis.call('LTRIM', noise, -noise_cap, -1)
      redis.call('HINCRBY', rec, 'noise_dropped', n - noise_cap)
    end
  else
    logged = redis.call('RPUSH', log, line)
  end
  if not ending then
    with_record(key)
  end
  return logged
end

-- A process's wake-up channel joins the ask's wakers, for as long as the record lives.
local function join_wakers(waker)
  redis.call('SADD', wakers, waker)
  with_record(wakers)
end

-- A process watches this ask (watch, observe): its channel joins the wakers while the ask is
-- pending. The ask's status, 'missing' for an unknown one.
local function watched(waker)
  if redis.call('EXISTS', rec) == 0 then
    return 'missing'
  end
  local status = redis.call('HGET', rec, 'status')
  if status == 'pending' then
    join_wakers(waker)
  end
  return status
end

-- A process waits for this ask: its channel joins the wakers (a waiter whose lease lapsed -- its
-- process stalled -- is still woken, and finds its answer on the feed), and its lease lives ms
-- more.
local function listen(waker, ms)
  join_wakers(waker)
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
-- An op ending many asks in one call (a sweep's) sets `waking` to {}: an expiry's wake-ups (each
-- its ask's id) then leave at the op's end (wake_all), which reads each ask's wakers only if
-- someone hears any of them. Nothing reads or changes them in between: the call is atomic. Never
-- on Cluster, where PUBSUB NUMSUB counts one node's subscribers only.
local waking = nil
local function wake(answered)
  if waking and not answered then
    waking[#waking + 1] = {ask_id, wakers, lease}
    return
  end
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

-- The expiries' wake-ups of a call, as wake() sends them, with the calls a storm needs (each of
-- its asks' wakers names mostly a process that stopped): the call's channels in one SUNION, one
-- PUBSUB NUMSUB saying which are heard; each ask's wakers read (SMEMBERS) and its wake-ups sent
-- only if one is heard, is per-slot ('}', SPUBLISHed whoever listens), or an ask with no wakers
-- has a lease (its waiter, from before per-process channels, hears the shared channel); an
-- unheard channel gets nothing (a publish there reached nobody). The wakers go in one DEL.
local function wake_all()
  if #waking == 0 then
    return
  end
  local sets, leases = {}, {}
  for i, woken in ipairs(waking) do
    sets[i], leases[i] = woken[2], woken[3]
  end
  local heard, plain, each = {}, {}, false
  for _, waker in ipairs(redis.call('SUNION', unpack(sets))) do
    if string.byte(waker, -1) == 125 then -- '}'
      each = true
    else
      heard[waker], plain[#plain + 1] = false, waker
    end
  end
  for at = 1, #plain, 100 do -- unpack() has a limit
    local counts = redis.call('PUBSUB', 'NUMSUB', unpack(plain, at, math.min(at + 99, #plain)))
    for i = 1, #counts, 2 do
      heard[counts[i]] = counts[i + 1] > 0
      each = each or counts[i + 1] > 0
    end
  end
  if not each and redis.call('EXISTS', unpack(sets)) < #sets then -- some ask has no wakers
    each = redis.call('EXISTS', unpack(leases)) > 0
  end
  if each then
    for _, woken in ipairs(waking) do
      local id, found = woken[1], redis.call('SMEMBERS', woken[2])
      for _, waker in ipairs(found) do
        if string.byte(waker, -1) == 125 then
          redis.call('SPUBLISH', waker, id)
        elseif heard[waker] then
          redis.call('PUBLISH', waker, id)
        end
      end
      if #found == 0 and redis.call('EXISTS', woken[3]) == 1 then
        redis.call('PUBLISH', channel, id)
      end
    end
  end
  redis.call('DEL', unpack(sets))
end

-- The body, read once per call (an ending reads it for the platform and the descriptions).
local body_found
local function stored_body()
  if body_found == nil then
    body_found = redis.call('HGET', rec, 'body') or ''
  end
  return body_found
end

-- The platform the ask was posted to: the record's 'platform' field (written at creation), or,
-- for an ask an earlier version created (or once settled: tidy drops the field), read from the
-- body without decoding it: the first
-- '"destination":{"platform":"' in it is the record's own (text inside a JSON string never holds
-- an unescaped quote). A plain find, once per ask: it stops at each occurrence of the text's
-- first character, so it looks for '{"platform":"' (a body has a few dozen '{', and hundreds of
-- '"': ten times fewer stops, an expiry's dearest step after its Redis calls) and checks what
-- precedes it, else looks for the whole text. '' if not found.
local DESTINATION = '"destination":'
local platform_found -- nil: not read yet; false: the record has no 'platform' field
local function platform()
  if platform_found == nil and body_found == nil then
    platform_found = redis.call('HGET', rec, 'platform')
  end
  if not platform_found then
    local body = stored_body()
    local open, at = string.find(body, '{"platform":"', 1, true)
    if open and string.sub(body, open - #DESTINATION, open - 1) ~= DESTINATION then
      open, at = string.find(body, DESTINATION .. '{"platform":"', 1, true)
    end
    local stop = at and string.find(body, '"', at + 1, true)
    platform_found = stop and string.sub(body, at + 1, stop - 1) or ''
  end
  return platform_found
end

-- The ask no longer counts among the pending: its member '<platform>\0<id>' leaves the pending
-- index (bridge.store.keys.pending_member), its id the created index. On Cluster the caller
-- does it (other slots). An op ending many asks in one call (a sweep's) sets `unpending` to
-- {members, ids} and drops them all at its end (unpend_all): two calls for the lot, not two
-- per ask (nothing reads the indexes in between: the call is atomic).
local unpending = nil
local function unpend()
  if not pending_index then
    return
  elseif unpending then
    local members, ids = unpending[1], unpending[2]
    members[#members + 1] = platform() .. '\0' .. ask_id
    ids[#ids + 1] = ask_id
  else
    redis.call('ZREM', pending_index, platform() .. '\0' .. ask_id)
    redis.call('ZREM', created_index, ask_id)
  end
end

local function unpend_all()
  if unpending and #unpending[1] > 0 then
    redis.call('ZREM', pending_index, unpack(unpending[1]))
    redis.call('ZREM', created_index, unpack(unpending[2]))
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

-- Whether nothing is left to do for the ask (it ended, its hand-off is settled, its final state
-- is shown or cannot be); then what only a pending ask needs is dropped, so an ended ask keeps
-- its audit trail and outcome for the retention and little else.
-- (bridge.store.redis.indexes.is_settled)
-- The descriptions went when its outcome was handed over (finish, confirm); an ask a previous
-- version ended kept them: they go now (it is settled again by any op that tidies) --
-- except on the feed ('sent'), whose delivery may not be acknowledged yet ('acked' drops them).
local function tidy()
  local handoff = redis.call('HGET', rec, 'handoff')
  if redis.call('HGET', rec, 'status') == 'pending'
      or (handoff ~= 'none' and handoff ~= 'sent' and handoff ~= 'confirmed')
      or redis.call('HGET', rec, 'told') == '0' or show_in(0) ~= nil then
    return '0'
  end
  unpend()
  redis.call('HDEL', rec, 'exp', 'attempt', 'render_by', 'reminded_at', 'timer_step', 'timer_at',
    'timer_by', 'timer_tries', 'platform')
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

-- Leave "pending": decide who gets the outcome, wake waiters, start the retention clock. With
-- nobody to tell, what only a person deciding needs goes in this step if it has no message (it is
-- settled: at once, or on Cluster once told); else once its final state is shown (tidy) -- not in
-- this step, the whole of an expiry storm's, which would spend a third of it rebuilding bodies.
-- `closing`: the ask closes unanswered (expired, cancelled) now, which is recorded in the same
-- write. `read`: the record's 'deferred' and 'message' as the caller read them in this call,
-- the ending event's number to store ('seq', see event), and 'quiet' if the ask has no noise
-- list -- an expiry's visit reads all it needs at once -- else nil: read here. Returns the
-- hand-off, told, and whether it has no message (so nothing to show).
local stream_kept = false -- the ended-asks stream was trimmed and its TTL set in this call
local function finish(status, closing, read)
  unpend()
  local handoff, deferred = 'none', '0'
  local was_deferred
  if read then
    was_deferred = read.deferred
  else
    was_deferred = redis.call('HGET', rec, 'deferred')
  end
  if was_deferred == '1' then
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
  local unposted
  if read then
    unposted = not read.message
  else
    unposted = redis.call('HEXISTS', rec, 'message') == 0
  end
  if handoff == 'none' and unposted then
    undescribe() -- settled already, or once told (on Cluster): it keeps no descriptions now
  end
  local fields = {'status', status, 'handoff', handoff, 'told', told}
  if read then
    fields[#fields + 1], fields[#fields + 2] = 'seq', read.seq
  end
  if deferred == '1' then
    fields[#fields + 1], fields[#fields + 2] = 'deferred', '1'
  end
  if closing then
    fields[#fields + 1], fields[#fields + 2] = 'closed_at', now
  end
  redis.call('HSET', rec, unpack(fields))
  redis.call('PEXPIRE', rec, retention_ms)
  redis.call('PEXPIRE', log, retention_ms)
  if not (read and read.quiet) then
    redis.call('PEXPIRE', noise, retention_ms)
  end
  wake(status == 'answered')
  if handoff == 'none' and told == '1' and unposted then
    tidy() -- settled already: no sweep visits it again, nor anything else that would tidy it
  end
  return handoff, told, unposted
end

-- A pending ask past its expires_at (`exp`, read here unless the caller did) ends as expired (a
-- sweep's visit, or a late submission). `read`: the record's 'deferred', 'message' and 'seq'
-- (the event counter) as the caller read them in this call, else nil (see finish). Returns
-- whether it did, and what finish returned.
local now_number -- tonumber(now), once per call (a sweep's call visits many asks)
local function expire_if_due(exp, read)
  now_number = now_number or tonumber(now)
  if tonumber(exp or redis.call('HGET', rec, 'exp')) > now_number then
    return false
  end
  if read then
    -- as text once ('%d': a Lua number is written with '%.14g', several times dearer), for the
    -- event and the ending's HSET
    local n = (tonumber(read.seq) or 0) + 1
    local seq = string.format('%d', n)
    -- Every event is counted ('seq') and goes to one list, so a lifecycle list as long as the
    -- count means no noise was ever written: no noise list to give the retention. (Shorter: some
    -- was. Longer: a version before the count wrote it; its noise went to the same list.)
    local logged = event('expired', 'null', '{}', true, seq)
    read = {deferred = read.deferred, message = read.message, seq = seq,
      quiet = logged == n}
  else
    event('expired', 'null', '{}', true)
  end
  return true, finish('expired', true, read)
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

-- A hand-over step done (the ask is on a stream): `field` goes from `from` to `to` -- once; run
-- twice, it stays -- and the reply says whether the ask is settled now: {'ok', settled}.
local function stepped(field, from, to)
  if redis.call('HGET', rec, field) == from then
    redis.call('HSET', rec, field, to)
  end
  return {'ok', tidy()}
end
