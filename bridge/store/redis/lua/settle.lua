-- A sweep's visits, answered with one reply per ask: the words of settle()'s answer joined by
-- newlines, which no word holds (a platform is JSON string text: a newline in it is escaped),
-- for Redis spends several times more turning a table into its reply than a string. On Cluster,
-- the one ask of KEYS. Elsewhere a batch in one call (the per-call setup of a script is a good
-- part of a visit's cost): the first ask's keys and id as every op takes them, then each other
-- ask's five keys (as KEYS 1-5) and its id. Each visit is as the ask's own call would be.
local hold = ARGV[7] -- seconds until a held hand-off is checked again
local interval = ARGV[8] -- the render interval (s)
local other_ids = {unpack(ARGV, 9)}
local other_keys = {unpack(KEYS, 9)}

-- A sweeper's visit to the ask: hold is the seconds until a held hand-off is checked again,
-- interval the render interval (s). An ask to show or feed is answered {verdict, its platform,
-- its hand-off, '1' if settled, '1' if on the ended-asks stream (else the caller adds it, then
-- 'told')}, not with its record: a storm's sweep reads 100,000 of these. 'done' gives the
-- platform too. One read of the fields that decide it and of all an expiry needs (most of a
-- storm's work: Redis spends more on each call a script makes than on what most calls do),
-- the platform too, which nearly every visit answers with (not the body, which an ask an earlier
-- version created is read for: Redis 7 hashes every byte of a string entering Lua, and the body
-- was a fifth of an expiry's cost there).
local function settle(hold, interval)
  local f = redis.call('HMGET', rec, 'status', 'exp', 'told', 'handoff', 'deferred', 'message',
    'seq', 'platform')
  local status, told, handoff = f[1], f[3], f[4]
  if not status then
    return {'missing'}
  end
  platform_found = f[8] -- false without the field: platform() reads the body
  local function visited(verdict, unshown)
    -- unshown: nothing to show, known already (an expiry here: shown if and only if posted)
    local settled = (handoff == 'none' or handoff == 'sent' or handoff == 'confirmed')
      and told ~= '0' and (unshown or unshown == nil and show_in(0) == nil)
    return {verdict, platform(), handoff, settled and '1' or '0', told ~= '0' and '1' or '0'}
  end
  if status == 'pending' then
    local expired, unposted
    expired, handoff, told, unposted = expire_if_due(f[2],
      {deferred = f[5], message = f[6], seq = f[7]})
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

unpending = {{}, {}}
if pending_index then -- not on Cluster (see waking)
  waking = {}
end
local replies = {table.concat(settle(hold, interval), '\n')}
for i, other in ipairs(other_ids) do
  local k = (i - 1) * 5
  rec, log, lease = other_keys[k + 1], other_keys[k + 2], other_keys[k + 3]
  noise, wakers = other_keys[k + 4], other_keys[k + 5]
  ask_id, body_found, platform_found = other, nil, nil
  replies[i + 1] = table.concat(settle(hold, interval), '\n')
end
unpend_all()
if waking then
  wake_all()
end
return replies
