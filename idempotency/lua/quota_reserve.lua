-- quota_reserve: reserve a place for one more stored response of a caller,
-- if the caller has room. Forgets the caller's entries that expired first.
-- KEYS[1] the caller's entries: a sorted set, member "<bytes>|<record key>"
--         for a stored record, "0|<id>" for a reservation (a request whose
--         handler runs); score the entry's expiry in ms (server time)
-- KEYS[2] the bytes the records hold (a string)
-- ARGV[1] most entries (0: no bound)
-- ARGV[2] most bytes (0: no bound)
-- ARGV[3] the reservation's member, "0|<id>"
-- ARGV[4] the retention in ms: how long the reservation lasts unless its
--         record replaces it or its request frees it (a process that died
--         while its handler ran leaves it until then, as a record would)
-- Returns 0 when the place is reserved, else the ms until the oldest entry
-- expires (at least 1), reserving nothing.
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
local ttl = tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then -- never shorten (see quota_add.lua)
	redis.call('PEXPIRE', KEYS[1], ttl)
end
return 0
