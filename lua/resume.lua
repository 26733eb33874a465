-- KEYS[1] lock key
-- ARGV[1] owner token the lock was detached with, ARGV[2] lease in
-- milliseconds, ARGV[3] the resuming owner's new token
-- Returns 1 when the old token held the lock, which now belongs to the new
-- token with the lease reset, 0 otherwise. Commands still on their way
-- with the old token (a renewal of the detached lock, a second Resume of
-- the same Ownership) find it held by another and change nothing.
-- (A waiter may have marked the token with '*', see acquire.lua; the mark
-- stays.)
local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[3], 'px', ARGV[2])
  return 1
elseif v == ARGV[1] .. '*' then
  redis.call('set', KEYS[1], ARGV[3] .. '*', 'px', ARGV[2])
  return 1
end
return 0
