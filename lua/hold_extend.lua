-- KEYS[1] a sorted set of holders scored by the end of their lease
-- (server clock, ms): a semaphore's permits or a read-write lock's readers
-- ARGV[1] holder token, ARGV[2] new lease in ms, ARGV[3] the change's
-- number (unused here: see "Known gaps" in RELIABILITY.md)
-- Returns 1 when the token holds a live lease and it was reset, 0
-- otherwise (a lease that ended is dropped).
local s = redis.call('zscore', KEYS[1], ARGV[1])
if not s then return 0 end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(s) <= now then
  redis.call('zrem', KEYS[1], ARGV[1])
  return 0
end
local lease = tonumber(ARGV[2])
redis.call('zadd', KEYS[1], now + lease, ARGV[1])
if redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return 1
