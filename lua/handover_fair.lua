-- KEYS[1] lock key (also the channel of its release notices), KEYS[2]
-- fence counter of the lock's hash slot, KEYS[3] fair-mode waiter queue
-- ARGV[1] token of the releasing grant, ARGV[2] token of the next grant,
-- ARGV[3] lease in ms, ARGV[4] the change's number (grant.lua), ARGV[5]
-- the place the next grant's waiter is queued under
-- Returns the next grant's fence (> 0) when the releasing token held the
-- lock and the oldest live waiter (serveHead, from queue_head.lua) is
-- queued under that place: the lock now belongs to the next token, its
-- lease reset, and the place has left the queue (or the next token holds
-- it already: a copy of this hand-off ran, and this one takes a fresh
-- fence, as a copy of an attempt does). -1 when the releasing token held
-- the lock but the head of the queue is another waiter, or nobody: the
-- lock is released as release_fair.lua does (granted to that waiter's bid,
-- or with its notice). 0 when the
-- releasing token does not hold the lock, changing nothing.
--
-- The fair hand-off within a Locker (wait_handoff.go): a grant of its own,
-- as in handover.lua, given only to the waiter whose turn it is in Redis,
-- so that arrival order holds across processes.
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
if not seq and not grantOf(v, ARGV[2]) then return 0 end
local t = redis.call('time')
if seq then
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local head, e = serveHead(KEYS[3], now, ARGV[5])
  if head ~= ARGV[5] then
    -- Granted to the head's bid, as release_fair.lua does, or released.
    if head and grantHead(KEYS[1], KEYS[3], e) then
      return -1
    end
    redis.call('del', KEYS[1])
    if head then
      -- Best-effort, as every notice (release.lua).
      redis.pcall('publish', KEYS[1], head)
    end
    return -1
  end
  if tonumber(ARGV[4]) < seq then seq = seq + 1 else seq = ARGV[4] end
  redis.call('set', KEYS[1], grantValue(ARGV[2], seq, marked), 'px', ARGV[3])
end
return takeFence(KEYS[2], t)
