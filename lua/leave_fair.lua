-- KEYS[1] lock key (also the channel of its release notices),
-- KEYS[2] fence counter (unused; listed so all keys share one slot),
-- KEYS[3] fair-mode waiter queue
-- ARGV[1] token of a waiter that stops waiting
-- Takes the waiter out of the queue, every entry of it (dequeue, from
-- queue_head.lua). If it was first and the key is free, the notice names
-- the next live waiter so the lock does not sit idle.
-- Returns 1 when the waiter was queued, 0 otherwise.
local found, wasFirst = dequeue(KEYS[3], ARGV[1])
if wasFirst and redis.call('exists', KEYS[1]) == 0 then
  local t = redis.call('time')
  local head = liveHead(KEYS[3], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  if head then
    -- Best-effort, as every notice (release.lua).
    redis.pcall('publish', KEYS[1], head)
  end
end
if found then return 1 end
return 0
