-- KEYS[1] lock key
-- ARGV[1] owner token
-- Returns 1 when the token held the lock and it is now gone, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  return 1
end
return 0
