-- KEYS[1] lock key, KEYS[2] fence counter of the lock's hash slot,
-- KEYS[3] fair-mode waiter queue
-- ARGV[1] the attempt's grant token, ARGV[2] lease in ms, ARGV[3] how long
-- the caller will wait in ms: when > 0 and the lock is not taken, the
-- caller joins the queue unless it is queued already (the client sends it
-- until an attempt's reply confirmed it is queued: a lost reply makes it
-- send it again), ARGV[4] the caller's place: the name it queues under,
-- one per Acquire, apart from its grant tokens (a place kept across
-- attempts never makes a token reused)
-- Returns the new fence (> 0) when the lock was taken, or -1 - (the holder's
-- remaining lease in ms; 0 when the key is free but an older waiter is first),
-- as {-1 - lease, the holder's value} when that names an owner ('~').
--
-- The queue is a list of "<deadline ms>:<place>", oldest first. The lock
-- goes to the oldest waiter whose deadline has not passed; waiters that gave
-- up without saying so, or died, are dropped once their deadline passes
-- (serveHead, from queue_head.lua). A waiter served leaves the queue.
-- The head of the queue is read only when the key is free: while it is
-- held, nobody's turn has come.
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
local t, now, head
if not v then
  t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  head = serveHead(KEYS[3], now, ARGV[4])
end
if seq or (not v and (not head or head == ARGV[4])) then
  -- A copy that ran already took this waiter out of the queue: so
  -- does this one, in case something put it back since.
  if seq then dequeue(KEYS[3], ARGV[4]) end
  if not t then t = redis.call('time') end
  -- A copy of this attempt that ran already (sent again after its
  -- connection closed) took it: take it anew, unless the holder has
  -- changed the lease since.
  if not seq then
    redis.call('set', KEYS[1], ARGV[1] .. '|0', 'px', ARGV[2])
  elseif seq == 0 then
    redis.call('set', KEYS[1], grantValue(ARGV[1], 0, marked), 'px', ARGV[2])
  end
  -- The fence, as in acquire.lua: never below the server clock in µs.
  local first = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local old = tonumber(redis.call('set', KEYS[2], string.format('%d', first), 'get'))
  if old and old >= first then
    first = old + 1
    redis.call('set', KEYS[2], string.format('%d', first))
  end
  return first
end
local wait = tonumber(ARGV[3])
if wait > 0 then
  local queued, last = scanQueue(KEYS[3], ARGV[4])
  if not queued then
    if not t then
      t = redis.call('time')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local deadline = now + wait
    if redis.call('rpush', KEYS[3], deadline .. ':' .. ARGV[4]) == 1 then
      redis.call('pexpire', KEYS[3], queueExpiry(deadline) - now)
    elseif queueExpiry(deadline) > queueExpiry(last) then
      redis.call('pexpire', KEYS[3], queueExpiry(deadline) - now, 'gt')
    end
  end
end
local pttl = 0
if v then pttl = redis.call('pttl', KEYS[1]) end
if pttl < 0 then pttl = 0 end
-- A holder that named itself (Options.Owner) is named, as in acquire.lua.
if v and string.find(v, '~', 1, true) then
  return {-1 - pttl, v}
end
return -1 - pttl
