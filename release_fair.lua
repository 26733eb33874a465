-- KEYS[1] lock key (also the channel of its release notices),
-- KEYS[2] fence counter (unused; listed so all keys share one slot),
-- KEYS[3] fair-mode waiter queue
-- ARGV[1] owner token
-- Returns 1 when the token held the lock and it is now gone, 0 otherwise.
-- The notice names the oldest live waiter's token, so only it wakes.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = ''
while true do
  local e = redis.call('lindex', KEYS[3], 0)
  if not e then break end
  local sep = string.find(e, ':', 1, true)
  if tonumber(string.sub(e, 1, sep - 1)) >= now then
    head = string.sub(e, sep + 1)
    break
  end
  redis.call('lpop', KEYS[3])
end
redis.call('publish', KEYS[1], head)
return 1
