-- KEYS[1] lock key (also the channel of its release notices)
-- ARGV[1] the grant's token (grant.lua); optionally ARGV[2] '1' to publish a release notice
-- even when no waiter marked the lock (the releasing Locker has waiters of
-- its own), then ARGV[3] a yield window in ms and ARGV[4] the id of the
-- Locker to yield to
-- Returns 1 when the token held the lock and it is now gone, 0 otherwise.
-- The notice is empty and wakes one waiter per Locker. A yielding release
-- leaves a "y:<Locker id>" marker for the window instead of deleting the
-- key: only that Locker's waiters may take the lock meanwhile (acquire.lua).
-- Notices are best-effort, here and in every script: a server that refuses
-- one (a user without channel permissions) must not turn a release that
-- happened into an error, so PUBLISH runs in pcall and waiters fall back
-- to their timers.
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
if not seq then
  return 0
end
if ARGV[3] then
  redis.call('set', KEYS[1], 'y:' .. ARGV[4], 'px', ARGV[3])
else
  redis.call('del', KEYS[1])
end
if marked or ARGV[2] == '1' then
  redis.pcall('publish', KEYS[1], '')
end
return 1
