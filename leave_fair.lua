-- KEYS[1] lock key (also the channel of its release notices),
-- KEYS[2] fence counter (unused; listed so all keys share one slot),
-- KEYS[3] fair-mode waiter queue
-- ARGV[1] token of a waiter that stops waiting
-- Takes the waiter out of the queue. If it was first and the key is free,
-- the notice names the next waiter so the lock does not sit idle.
-- Returns 1 when the waiter was queued, 0 otherwise.
local suffix = ':' .. ARGV[1]
local entries = redis.call('lrange', KEYS[3], 0, -1)
for i, e in ipairs(entries) do
  if string.sub(e, -#suffix) == suffix then
    redis.call('lrem', KEYS[3], 1, e)
    if i == 1 and redis.call('exists', KEYS[1]) == 0 then
      local next = redis.call('lindex', KEYS[3], 0)
      if next then
        redis.call('publish', KEYS[1], string.sub(next, string.find(next, ':', 1, true) + 1))
      end
    end
    return 1
  end
end
return 0
