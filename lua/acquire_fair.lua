-- KEYS[1] lock key, KEYS[2] fence counter of the lock's hash slot,
-- KEYS[3] fair-mode waiter queue, and with grants at release KEYS[4] the
-- key's lost set (claim.lua)
-- ARGV[1] the attempt's grant token, ARGV[2] lease in ms, ARGV[3] how long
-- the caller will wait in ms: when > 0 and the lock is not taken, the
-- caller joins the queue unless it is queued already (the client sends it
-- until an attempt's reply confirmed it is queued: a lost reply makes it
-- send it again), ARGV[4] the caller's place: the name it queues under,
-- one per Acquire, apart from its grant tokens (a place kept across
-- attempts never makes a token reused); and when the caller's Locker
-- takes part in grants at release (wait_bid.go), ARGV[5] and on the
-- tokens of the waiter's earlier attempts that may have been granted the
-- lock, or '' for none; such an attempt whose token a clean-up buried
-- (claim.lua) changes nothing
-- Returns the new fence (> 0) when the lock was taken, or -1 - (the holder's
-- remaining lease in ms; 0 when the key is free but an older waiter is first),
-- as {-1 - lease, the holder's value} when that names an owner ('~'); with
-- grants at release, as {-1 - lease, the holder's value or '', 0} when the
-- caller's place is not in the queue and it did not ask to join: a grant
-- at release took its entry out, and ran out before the waiter took it
-- over, so the waiter asks to join again.
--
-- The queue is a list of "<deadline ms>:<place>", oldest first. The lock
-- goes to the oldest waiter whose deadline has not passed; waiters that gave
-- up without saying so, or died, are dropped once their deadline passes
-- (serveHead, from queue_head.lua). A waiter served leaves the queue.
-- The head of the queue is read only when the key is free: while it is
-- held, nobody's turn has come.
--
-- With grants at release, a waiter's entry carries the bid of its latest
-- attempt that did not take the lock (bidEntry): a release grants the key
-- to it (grantHead). So the key is only ever granted to a waiter's latest
-- attempt or, while its next attempt is on its way, to an earlier one,
-- which that next attempt then takes over: a late or repeated notice names
-- a token nobody waits on (bids.lua says the same of the default mode).
local bids = ARGV[5] ~= nil
if bids and buried(KEYS[4], ARGV[1]) then
  -- A copy of an attempt that its waiter gave up for lost, come after
  -- the clean-up (claim.lua): it takes nothing and queues nobody, and
  -- nobody reads this reply.
  return -1
end
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
local t, now, head
if not v then
  t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local e
  head, e = serveHead(KEYS[3], now, ARGV[4])
  if head and head ~= ARGV[4] and bids and grantHead(KEYS[1], KEYS[3], e) then
    -- The key is free and an older waiter is first: it is granted the
    -- key now, as a release would have, so that a head that is gone
    -- costs the claim window, not its bid's whole life (claim.lua).
    v = redis.call('get', KEYS[1])
  end
elseif not seq and bids then
  -- A release granted the key to one of this waiter's earlier attempts,
  -- and the waiter, not told (a lost notice) or told too late, tried
  -- again: this attempt's grant takes it over, with a lease of its own,
  -- and the earlier grant, never used, ends.
  for i = 5, #ARGV do
    if ARGV[i] ~= '' and grantOf(v, ARGV[i]) == 0 then
      seq = false
      break
    end
  end
end
if seq ~= nil or (not v and (not head or head == ARGV[4])) then
  -- A copy that ran already took this waiter out of the queue, as did the
  -- grant taken over: so does this one, in case something put it back
  -- since.
  if seq ~= nil then dequeue(KEYS[3], ARGV[4]) end
  if not t then t = redis.call('time') end
  -- A copy of this attempt that ran already (sent again after its
  -- connection closed) took it: take it anew, unless the holder has
  -- changed the lease since.
  if not seq then
    redis.call('set', KEYS[1], ARGV[1] .. '|0', 'px', ARGV[2])
  elseif seq == 0 then
    redis.call('set', KEYS[1], grantValue(ARGV[1], 0, marked), 'px', ARGV[2])
  end
  return takeFence(KEYS[2], t)
end
local wait = tonumber(ARGV[3])
local unqueued = false
if wait > 0 or bids then
  -- pos: the entry's index when queued, else the latest deadline queued.
  local queued, pos, e = scanQueue(KEYS[3], ARGV[4])
  unqueued = not queued and wait == 0
  if not t then
    t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if queued then
    -- The entry's bid becomes this attempt's, if it is one this attempt
    -- names (or none): a copy of an earlier attempt that arrives late
    -- leaves a later attempt's bid alone, since the waiter would not take
    -- a grant to it, nor would its next attempt take that over.
    local bid = bids and string.match(e, '|%d+|%d+|(.+)$')
    local replace = bids and not bid
    for i = 5, #ARGV do
      if bid and ARGV[i] == bid then replace = true end
    end
    if replace then
      local deadline = string.sub(e, 1, string.find(e, ':', 1, true) - 1)
      redis.call('lset', KEYS[3], pos, bidEntry(deadline, ARGV[4], now, ARGV[2], ARGV[1]))
    end
  elseif wait > 0 then
    local deadline = now + wait
    local entry = deadline .. ':' .. ARGV[4]
    if bids then entry = bidEntry(deadline, ARGV[4], now, ARGV[2], ARGV[1]) end
    if redis.call('rpush', KEYS[3], entry) == 1 then
      redis.call('pexpire', KEYS[3], queueExpiry(deadline) - now)
    elseif queueExpiry(deadline) > queueExpiry(pos) then
      redis.call('pexpire', KEYS[3], queueExpiry(deadline) - now, 'gt')
    end
  end
end
local pttl = 0
if v then pttl = redis.call('pttl', KEYS[1]) end
-- A lease with under a ms left reads 0, which here says an older waiter
-- is first: report 1, so the waiter looks again when the holder goes.
if v and pttl == 0 then pttl = 1 elseif pttl < 0 then pttl = 0 end
if unqueued then
  local holder = ''
  if v and string.find(v, '~', 1, true) then holder = v end
  return {-1 - pttl, holder, 0}
end
-- A holder that named itself (Options.Owner) is named, as in acquire.lua.
if v and string.find(v, '~', 1, true) then
  return {-1 - pttl, v}
end
return -1 - pttl
