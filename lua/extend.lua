-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] new lease in milliseconds, ARGV[3] the
-- change's number (grant.lua)
-- Returns 1 when the token holds the lock and its lease was reset, 2 when
-- the token holds it but a later change is in force (this one is late, and
-- changes nothing), 0 otherwise.
local seq, marked = grantOf(redis.call('get', KEYS[1]), ARGV[1])
if not seq then return 0 end
if tonumber(ARGV[3]) < seq then return 2 end
redis.call('set', KEYS[1], grantValue(ARGV[1], ARGV[3], marked), 'px', ARGV[2])
return 1
