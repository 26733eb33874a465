-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] new lease in milliseconds
-- Returns 1 when the token holds the lock and its lease was reset, 0 otherwise.
-- (A waiter may have marked the token with '*', see acquire.lua.)
local v = redis.call('get', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '*' then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
