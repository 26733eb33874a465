-- KEYS[1] a sorted set of holders scored by the end of their lease
-- (server clock, ms)
-- ARGV[1] holder token
-- Returns the remaining lease in ms when the token holds a live lease,
-- -3 otherwise.
local s = redis.call('zscore', KEYS[1], ARGV[1])
if not s then return -3 end
local t = redis.call('time')
local left = tonumber(s) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
if left <= 0 then return -3 end
return left
