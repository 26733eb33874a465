-- Shared by the fair-mode scripts, which Go prepends it to (store_scripts.go).
-- Queue entries are "<deadline ms>:<token>", oldest first; now is in ms.
-- Each token has at most one entry: an attempt whose reply was lost is
-- sent again and must not queue its waiter twice (scanQueue), and a waiter
-- that is served or leaves takes its entry with it (serveHead, dequeue),
-- so no stale entry holds the key for a waiter that is gone.
--
-- A queue expires at queueExpiry of the latest deadline of its entries,
-- or later: whoever pushes an entry makes sure of it (acquire_fair.lua,
-- serveHead).

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

-- queueExpiry returns when a queue whose latest deadline is deadline (ms
-- of the server clock) expires: at the end of that deadline's second. An
-- entry whose deadline falls in the second of one already queued needs no
-- PEXPIRE, so on a busy key most entries are pushed without one; a
-- queue outlives its last waiter by less than a second.
local function queueExpiry(deadline)
  return (math.floor(deadline / 1000) + 1) * 1000
end

-- serveHead drops the waiters at the head of queue whose deadline has
-- passed, as liveHead does, and returns the token of the first live one
-- (nil when none is left). When that token is place, its entry leaves the
-- queue (the waiter is served); otherwise it stays first. It pops before
-- it looks, so serving the head costs one command; a head that stays is
-- pushed back, and when it was the last entry, so that popping it took the
-- queue's expiry with it, the queue is given one again.
local function serveHead(queue, now, place)
  while true do
    local e = redis.call('lpop', queue)
    if not e then return nil end
    local sep = string.find(e, ':', 1, true)
    local deadline = tonumber(string.sub(e, 1, sep - 1))
    if deadline >= now then
      local head = string.sub(e, sep + 1)
      if head ~= place and redis.call('lpush', queue, e) == 1 then
        redis.call('pexpire', queue, queueExpiry(deadline) - now)
      end
      return head
    end
  end
end

-- tokenOf returns the token of queue entry e.
local function tokenOf(e)
  return string.sub(e, string.find(e, ':', 1, true) + 1)
end

-- scanQueue reports whether token has an entry in queue, and when it has
-- none, the latest deadline of the queue's entries (0 when it is empty).
local function scanQueue(queue, token)
  local last = 0
  for _, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    local sep = string.find(e, ':', 1, true)
    if string.sub(e, sep + 1) == token then return true, last end
    local deadline = tonumber(string.sub(e, 1, sep - 1))
    if deadline > last then last = deadline end
  end
  return false, last
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

