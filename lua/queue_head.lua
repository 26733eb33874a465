-- Shared by the fair-mode scripts, which Go prepends it to (store_scripts.go).
-- Queue entries are "<deadline ms>:<place>", oldest first; now is in ms.
-- A fair mutex waiter whose Locker makes grants at release (wait_bid.go)
-- adds its bid: "<deadline ms>:<place>|<ms placed>|<lease ms>|<token>",
-- the token of its latest attempt (grantHead). Neither places nor tokens
-- hold '|'.
-- Each place has at most one entry: an attempt whose reply was lost is
-- sent again and must not queue its waiter twice (scanQueue), and a waiter
-- that is served or leaves takes its entry with it (serveHead, dequeue),
-- so no stale entry holds the key for a waiter that is gone.
--
-- A queue expires at queueExpiry of the latest deadline of its entries,
-- or later: whoever pushes an entry makes sure of it (acquire_fair.lua,
-- serveHead).

-- placeOf returns the place of queue entry e: the name its waiter queues
-- under, without the bid it may carry.
local function placeOf(e)
  local s = string.sub(e, string.find(e, ':', 1, true) + 1)
  local bar = string.find(s, '|', 1, true)
  if bar then return string.sub(s, 1, bar - 1) end
  return s
end

-- isPlace reports whether queue entry e queues place, without taking its
-- place apart (scanQueue and dequeue run it on every entry).
local function isPlace(e, place)
  local sep = string.find(e, ':', 1, true)
  local stop = sep + #place
  if string.sub(e, sep + 1, stop) ~= place then return false end
  local c = string.byte(e, stop + 1)
  return c == nil or c == 124 -- '|'
end

-- entryLive reports whether queue entry e, whose deadline ends at sep,
-- still queues a live waiter at now: its deadline has not passed, and
-- the bid it carries, if any, was placed less than bidLife ago (a waiter
-- that bids places it again at least every second while it waits, so
-- an older one is a waiter that is gone: claim.lua).
local function entryLive(e, sep, now)
  if tonumber(string.sub(e, 1, sep - 1)) < now then return false end
  local at = string.match(e, '|(%d+)|%d+|', sep)
  return not at or now - tonumber(at) < bidLife
end

-- liveHead drops the waiters at the head of queue that are gone
-- (entryLive) and returns the place of the first live one and its entry
-- (nil when none is left).
local function liveHead(queue, now)
  while true do
    local e = redis.call('lindex', queue, 0)
    if not e then return nil end
    if entryLive(e, string.find(e, ':', 1, true), now) then
      return placeOf(e), e
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

-- serveHead drops the waiters at the head of queue that are gone, as
-- liveHead does, and returns the place of the first live one
-- and its entry (nil when none is left). When that is place, its entry
-- leaves the queue (the waiter is served); otherwise it stays first. It pops before
-- it looks, so serving the head costs one command; a head that stays is
-- pushed back, and when it was the last entry, so that popping it took the
-- queue's expiry with it, the queue is given one again.
local function serveHead(queue, now, place)
  while true do
    local e = redis.call('lpop', queue)
    if not e then return nil end
    local sep = string.find(e, ':', 1, true)
    if entryLive(e, sep, now) then
      local deadline = tonumber(string.sub(e, 1, sep - 1))
      local head = placeOf(e)
      if head ~= place and redis.call('lpush', queue, e) == 1 then
        redis.call('pexpire', queue, queueExpiry(deadline) - now)
      end
      return head, e
    end
  end
end

-- scanQueue reports whether place has an entry in queue, and then its
-- index (from 0) and the entry; when it has none, the latest deadline of
-- the queue's entries (0 when it is empty).
local function scanQueue(queue, place)
  local last = 0
  for i, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    local sep = string.find(e, ':', 1, true)
    if isPlace(e, place) then return true, i - 1, e end
    local deadline = tonumber(string.sub(e, 1, sep - 1))
    if deadline > last then last = deadline end
  end
  return false, last
end

-- dequeue removes every entry of place from queue. It reports whether
-- there was one, and whether the first entry was one.
local function dequeue(queue, place)
  local found, first = false, false
  for i, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    if isPlace(e, place) then
      redis.call('lrem', queue, 0, e)
      found, first = true, first or i == 1
    end
  end
  return found, first
end


-- takeFence takes the next fence from the counter of the lock's slot:
-- never below the server clock t in µs (from TIME), so fences keep
-- rising after a restart that lost the counter (acquire.lua). The hold
-- scripts (fence.lua) take theirs with it too.
local function takeFence(counter, t)
  local first = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local old = tonumber(redis.call('set', counter, string.format('%d', first), 'get'))
  if old and old >= first then
    first = old + 1
    redis.call('set', counter, string.format('%d', first))
  end
  return first
end

-- bidEntry returns the entry that queues place until deadline, with the
-- bid of the attempt token for a lease of ttl ms, placed at now.
local function bidEntry(deadline, place, now, ttl, token)
  return deadline .. ':' .. place .. '|' .. now .. '|' .. ttl .. '|' .. token
end

-- grantHead grants the lock, which the caller has just freed, to the bid
-- that e, the live head of queue, carries: the bid's token holds the key
-- for the claim window (claim.lua), or the bid's lease if shorter, the
-- entry leaves the queue (its waiter is served), and the notice
-- "g<ms> <token>" wakes the waiter, whose next attempt claims the grant
-- with a fence of its own (acquire_fair.lua). An entry without a bid is
-- not granted. It reports whether it granted.
local function grantHead(lock, queue, e)
  local ttl, token = string.match(e, '|%d+|(%d+)|(.+)$')
  if not ttl then return false end
  redis.call('lpop', queue)
  local px = math.min(tonumber(ttl), claimWindow)
  redis.call('set', lock, token .. '|0', 'px', px)
  -- Best-effort, as every notice (release.lua): a lost one is made good
  -- by the waiter's next attempt, or the grant ends within px.
  redis.pcall('publish', lock, 'g' .. px .. ' ' .. token)
  return true
end
