-- quota_add: count a stored response against its caller's quota, in place
-- of the reservation its request made (see quota_reserve.lua).
-- KEYS[1] the caller's entries (see quota_reserve.lua)
-- KEYS[2] the bytes the records hold
-- ARGV[1] the record's size in bytes
-- ARGV[2] the record's key
-- ARGV[3] the retention in ms: the record's lease, and the quota keys'
-- ARGV[4] the reservation's member, "0|<id>"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREM', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1] .. '|' .. ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[1])
-- Never shorten: a route with a longer retention may share the quota.
for _, k in ipairs(KEYS) do
	if redis.call('PTTL', k) < ttl then
		redis.call('PEXPIRE', k, ttl)
	end
end
return 1
