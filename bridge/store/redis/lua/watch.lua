-- A call starts waiting (or its process re-subscribed): its channel joins the wakers of a pending
-- ask, and its lease lives lease_ms more. Replies {status}.
local lease_ms = ARGV[7]
local waker = ARGV[8] -- its wake-up channel

local status = watched(waker)
if status ~= 'missing' then
  redis.call('SET', lease, '1', 'PX', lease_ms)
end
return {status}
