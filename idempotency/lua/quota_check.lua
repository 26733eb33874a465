-- quota_check: is there room for one more stored response of a caller?
-- Forgets the caller's records that expired first.
-- KEYS[1] the caller's records: a sorted set, member "<bytes>|<record key>",
--         score the record's expiry in ms (server time)
-- KEYS[2] the bytes those records hold (a string)
-- ARGV[1] most records (0: no bound)
-- ARGV[2] most bytes (0: no bound)
-- Returns 0 when there is room, else the ms until the oldest record expires
-- (at least 1).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #gone > 0 then
	local freed = 0
	for _, m in ipairs(gone) do
		freed = freed + (tonumber(string.match(m, '^(%d+)|')) or 0)
	end
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
	if redis.call('DECRBY', KEYS[2], freed) <= 0 then
		redis.call('DEL', KEYS[2])
	end
end
local maxn, maxb = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
local b = tonumber(redis.call('GET', KEYS[2]) or '0')
if (maxn > 0 and n >= maxn) or (maxb > 0 and b >= maxb) then
	local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
	if oldest[2] then
		return math.max(tonumber(oldest[2]) - now, 1)
	end
	return 1
end
return 0
