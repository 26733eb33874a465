-- KEYS[1] lock key (also the channel of its release notices)
-- ARGV[1] owner token; optionally ARGV[2] a yield window in ms and ARGV[3]
-- the id of the Locker to yield to
-- Returns 1 when the token held the lock and it is now gone, 0 otherwise.
-- A release publishes an empty notice, waking one waiter per Locker. A
-- yielding release leaves a "y:<Locker id>" marker for the window instead of
-- deleting the key: only that Locker's waiters may take the lock meanwhile
-- (acquire.lua).
if redis.call('get', KEYS[1]) == ARGV[1] then
  if ARGV[2] then
    redis.call('set', KEYS[1], 'y:' .. ARGV[3], 'px', ARGV[2])
  else
    redis.call('del', KEYS[1])
  end
  redis.call('publish', KEYS[1], '')
  return 1
end
return 0
