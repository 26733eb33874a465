-- KEYS[1] lock key (also the channel of its release notices)
-- ARGV[1] owner token
-- Returns 1 when the token held the lock and it is now gone, 0 otherwise.
-- A release publishes an empty notice, waking one waiter per Locker.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[1], '')
  return 1
end
return 0
