-- KEYS[1] lock key (also the channel of its release notices),
-- KEYS[2] fence counter (unused; listed so all keys share one slot),
-- KEYS[3] fair-mode waiter queue
-- ARGV[1] owner token
-- Returns 1 when the token held the lock and it is now gone, 0 otherwise.
-- The notice names the oldest live waiter's place (liveHead, from
-- queue_head.lua), so only it wakes; with nobody queued there is none. It
-- is best-effort (pcall), as every notice (release.lua).
if not grantOf(redis.call('get', KEYS[1]), ARGV[1]) then
  return 0
end
redis.call('del', KEYS[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = liveHead(KEYS[3], now)
if head then
  redis.pcall('publish', KEYS[1], head)
end
return 1
