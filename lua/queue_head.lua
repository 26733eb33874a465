-- Shared by the fair-mode scripts, which Go prepends it to (store_scripts.go).
-- Queue entries are "<deadline ms>:<token>", oldest first; now is in ms.
-- Each token has at most one entry: an attempt whose reply was lost is
-- sent again and must not queue its waiter twice (isQueued), and a waiter
-- that is served or leaves takes every entry of its token with it
-- (dequeue), so no stale entry holds the key for a waiter that is gone.

-- liveHead drops the waiters at the head of queue whose deadline has passed
-- and returns the token of the first live one (nil when none is left).
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

-- tokenOf returns the token of queue entry e.
local function tokenOf(e)
  return string.sub(e, string.find(e, ':', 1, true) + 1)
end

-- isQueued reports whether token has an entry in queue.
local function isQueued(queue, token)
  for _, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    if tokenOf(e) == token then return true end
  end
  return false
end

-- dequeue removes every entry of token from queue. It reports whether
-- there was one, and whether the first entry was one.
local function dequeue(queue, token)
  local found, first = false, false
  for i, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    if tokenOf(e) == token then
      redis.call('lrem', queue, 0, e)
      found, first = true, first or i == 1
    end
  end
  return found, first
end

