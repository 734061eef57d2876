-- The waiting call claims the outcome (see take in lib/core.lua): {'taken' or 'other', record}.
local lease_ms = ARGV[7]

if redis.call('EXISTS', rec) == 0 then
  return {'missing'}
end
return take(lease_ms)
