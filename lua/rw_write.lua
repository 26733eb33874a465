-- KEYS[1] the writer: its token, with its lease as the key's expiry,
-- KEYS[2] fence counter of the slot, KEYS[3] the queue of waiting writers
-- ("<deadline ms>:<token>", oldest first), KEYS[4] the readers (a sorted
-- set scored by lease end, server ms; also the channel of notices)
-- ARGV[1] the attempt's grant token (grant.lua), ARGV[2] lease in ms,
-- ARGV[3] how long the writer keeps its place in the queue if the lock is
-- not free, in ms (0: it does not wait, and does not queue), ARGV[4] the
-- writer's place: the name it queues under, one per AcquireWrite, apart
-- from its grant tokens
-- Returns the fence when the write hold was taken, or -1 - (ms until the
-- holders' leases end, as far as known; 0 when only an older writer
-- waits) when not.
--
-- The writer takes the lock when nobody holds it and no older live writer
-- waits. A waiting writer queues, which keeps new readers out (rw_read.lua);
-- its entry lasts only as long as ARGV[3], which the client keeps short
-- (at most the lease) and renews with every attempt, so a writer that
-- died stops blocking readers soon.
local now, t = nowMs()
redis.call('zremrangebyscore', KEYS[4], '-inf', now)
local v = redis.call('get', KEYS[1])
local head = liveHead(KEYS[3], now)
local seq = grantOf(v, ARGV[1])
if seq or (not v and redis.call('zcard', KEYS[4]) == 0 and (not head or head == ARGV[4])) then
  dequeue(KEYS[3], ARGV[4])
  -- seq: a copy of this attempt ran already (sent again after its
  -- connection closed); take it anew, unless the lease changed since.
  if not seq or seq == 0 then
    redis.call('set', KEYS[1], ARGV[1] .. '|0', 'px', ARGV[2])
  end
  return takeFence(KEYS[2], t)
end
local stay = tonumber(ARGV[3])
if stay > 0 then enqueue(KEYS[3], ARGV[4], now + stay, now) end
local left = 0
if v then
  left = redis.call('pttl', KEYS[1])
else
  local last = redis.call('zrange', KEYS[4], -1, -1, 'withscores')
  if last[2] then left = tonumber(last[2]) - now end
end
if left < 0 then left = 0 end
return -1 - left
