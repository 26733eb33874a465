-- quota_add: count a stored response against its caller's quota.
-- KEYS[1] the caller's records (see quota_check.lua)
-- KEYS[2] the bytes those records hold
-- ARGV[1] the record's size in bytes
-- ARGV[2] the record's key
-- ARGV[3] the retention in ms: the record's lease, and the quota keys'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1] .. '|' .. ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
