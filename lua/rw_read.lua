-- KEYS[1] the readers: a sorted set of reader tokens scored by the end of
-- each reader's lease (server clock, ms); also the channel of the lock's
-- notices. KEYS[2] fence counter of the slot, KEYS[3] the queue of
-- waiting writers ("<deadline ms>:<token>", oldest first), KEYS[4] the
-- writer: its token, with its lease as the key's expiry
-- ARGV[1] reader token, ARGV[2] lease in ms
-- Returns the fence when the read hold was taken, or -1 - (the writer's
-- remaining lease in ms; 0 when a writer only waits) when not.
--
-- Readers share the lock while no writer holds it and none waits: a
-- waiting writer keeps new readers out, so a stream of readers cannot
-- starve it. Readers whose lease ended (crashed) are dropped.
local now, t = nowMs()
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
local lease = tonumber(ARGV[2])
-- An earlier attempt took it but its reply was lost: take it anew.
if redis.call('zscore', KEYS[1], ARGV[1]) == false then
  local w = redis.call('pttl', KEYS[4])
  if w ~= -2 then
    if w < 0 then w = 0 end
    return -1 - w
  end
  if liveHead(KEYS[3], now) then return -1 end
end
holdUntil(KEYS[1], ARGV[1], now, lease)
return takeFence(KEYS[2], t)
