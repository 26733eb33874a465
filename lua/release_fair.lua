-- KEYS[1] lock key (also the channel of its release notices),
-- KEYS[2] fence counter of the lock's hash slot,
-- KEYS[3] fair-mode waiter queue; and for the clean-up of an attempt
-- whose reply was lost, KEYS[4] the key's lost set, where it buries the
-- attempt's token (claim.lua) for ARGV[2] ms
-- ARGV[1] owner token
-- Returns 1 when the token held the lock and it is now released, 0
-- otherwise.
-- The lock goes to the oldest live waiter (liveHead, from queue_head.lua):
-- granted to the bid its entry carries, if any (grantHead), with a grant
-- notice; otherwise the key is deleted and the notice names the waiter's
-- place, so only it wakes (to try). With nobody queued there is no
-- notice. Every notice is best-effort (pcall), as in release.lua.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if KEYS[4] then bury(KEYS[4], ARGV[1], tonumber(ARGV[2]), now) end
if not grantOf(redis.call('get', KEYS[1]), ARGV[1]) then
  return 0
end
local head, e = liveHead(KEYS[3], now)
if head and grantHead(KEYS[1], KEYS[3], e) then
  return 1
end
redis.call('del', KEYS[1])
if head then
  redis.pcall('publish', KEYS[1], head)
end
return 1
