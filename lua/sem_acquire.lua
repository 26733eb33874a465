-- KEYS[1] the semaphore's holders: a sorted set of permit tokens scored by
-- the end of each permit's lease (server clock, ms); also the channel of
-- its notices. KEYS[2] fence counter of the slot, KEYS[3] fair-mode
-- waiter queue ("<deadline ms>:<token>", oldest first)
-- ARGV[1] permit token, ARGV[2] lease in ms, ARGV[3] permits (N),
-- ARGV[4] '1' for fair mode, ARGV[5] in fair mode, how long the caller
-- will wait in ms: > 0 queues it (or keeps its place), ARGV[6] in fair
-- mode, the caller's place: the name it queues under, one per Acquire,
-- apart from its permit tokens (one per attempt)
-- Returns the fence when the permit was taken, or
-- -1 - (ms until the earliest permit's lease ends; 0 if none) when not,
-- as {-1 - ms, that permit's token} when the token names an owner ('~').
--
-- Permits whose lease ended (a crashed holder) are dropped first, so a
-- crashed holder's permit frees itself. N is the caller's: a semaphore
-- whose N shrank lets no new holder in until fewer than N hold, and
-- evicts nobody. In fair mode a free permit goes to the oldest live
-- waiters: a caller takes one only if fewer live waiters are queued ahead
-- of it than permits are free.
local now, t = nowMs()
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
local lease = tonumber(ARGV[2])
local fair = ARGV[4] == '1'
-- A copy of this attempt took the permit already (sent again after its
-- connection closed): take it anew.
local take = redis.call('zscore', KEYS[1], ARGV[1]) ~= false
if not take then
  local free = tonumber(ARGV[3]) - redis.call('zcard', KEYS[1])
  if free > 0 then
    take = not fair or queueAt(KEYS[3], ARGV[6], now, -1) < free
  end
end
if take then
  if fair then dequeue(KEYS[3], ARGV[6]) end
  holdUntil(KEYS[1], ARGV[1], now, lease)
  return takeFence(KEYS[2], t)
end
if fair and tonumber(ARGV[5]) > 0 then
  enqueue(KEYS[3], ARGV[6], now + tonumber(ARGV[5]), now)
end
local first = redis.call('zrange', KEYS[1], 0, 0, 'withscores')
local wait = 0
if first[2] then wait = math.max(tonumber(first[2]) - now, 0) end
-- The holder whose permit frees first, when it named itself, is named
-- to the waiter.
if first[1] and string.find(first[1], '~', 1, true) then
  return {-1 - wait, first[1]}
end
return -1 - wait
