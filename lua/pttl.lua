-- KEYS[1] lock key
-- ARGV[1] owner token
-- Returns the remaining lease in ms when the token holds the lock, -3 otherwise.
if grantOf(redis.call('get', KEYS[1]), ARGV[1]) then
  return redis.call('pttl', KEYS[1])
end
return -3
