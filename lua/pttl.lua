-- KEYS[1] lock key
-- ARGV[1] owner token
-- Returns the remaining lease in ms when the token holds the lock, -3 otherwise.
-- (A waiter may have marked the token with '*', see acquire.lua.)
local v = redis.call('get', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '*' then
  return redis.call('pttl', KEYS[1])
end
return -3
