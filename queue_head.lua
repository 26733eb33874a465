-- Shared by the fair-mode scripts, which Go prepends it to (scripts.go).
-- liveHead drops the waiters at the head of queue whose deadline has passed
-- and returns the token of the first live one (nil when none is left).
-- Queue entries are "<deadline ms>:<token>", oldest first; now is in ms.
local function liveHead(queue, now)
  while true do
    local e = redis.call('lindex', queue, 0)
    if not e then return nil end
    local sep = string.find(e, ':', 1, true)
    if tonumber(string.sub(e, 1, sep - 1)) >= now then
      return string.sub(e, sep + 1)
    end
    redis.call('lpop', queue)
  end
end

