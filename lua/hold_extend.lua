-- KEYS[1] a sorted set of holders scored by the end of their lease
-- (server clock, ms): a semaphore's permits or a read-write lock's
-- readers; KEYS[2] the hash of the number of each holder's last lease
-- change (the set's name and ':n')
-- ARGV[1] holder token, ARGV[2] new lease in ms, ARGV[3] the change's
-- number
-- Returns 1 when the token holds a live lease and it was reset, 2 when it
-- holds one but a later change is in force (this one is late, and changes
-- nothing), 0 otherwise (a lease that ended is dropped).
--
-- Lease changes on one grant are ordered, as a lock key's (grant.lua): a
-- change numbered below the last one applied is refused. A holder with no
-- number recorded has had none since it was granted. Numbers of holders
-- that are gone are dropped here, once they outnumber the live ones; a
-- holder's token is never reused, so a stale one harms nobody meanwhile.
local s = redis.call('zscore', KEYS[1], ARGV[1])
if not s then return 0 end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(s) <= now then
  redis.call('zrem', KEYS[1], ARGV[1])
  redis.call('hdel', KEYS[2], ARGV[1])
  return 0
end
local seq = tonumber(ARGV[3])
local last = tonumber(redis.call('hget', KEYS[2], ARGV[1])) or 0
if seq < last then return 2 end
local lease = tonumber(ARGV[2])
redis.call('zadd', KEYS[1], now + lease, ARGV[1])
redis.call('hset', KEYS[2], ARGV[1], ARGV[3])
if redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
-- The numbers live as long as the set.
redis.call('pexpire', KEYS[2], math.max(redis.call('pttl', KEYS[1]), lease))
if redis.call('hlen', KEYS[2]) > 2 * redis.call('zcard', KEYS[1]) + 8 then
  for _, h in ipairs(redis.call('hkeys', KEYS[2])) do
    if not redis.call('zscore', KEYS[1], h) then redis.call('hdel', KEYS[2], h) end
  end
end
return 1
