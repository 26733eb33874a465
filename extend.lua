-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] new lease in milliseconds
-- Returns 1 when the token holds the lock and its lease was reset, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
