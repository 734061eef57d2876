-- An observer starts watching (Store.observe): its channel joins the wakers of a pending ask; no
-- lease, no take. Replies {status}.
local waker = ARGV[7] -- its wake-up channel

return {watched(waker)}
