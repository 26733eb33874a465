-- KEYS[1] lock key
-- ARGV[1] token of the grant the lock was detached from, ARGV[2] lease in
-- milliseconds, ARGV[3] the resuming grant's token
-- Returns 1 when the old token held the lock, which now belongs to the new
-- token with the lease reset (its change numbers start again: grant.lua),
-- or when the new token holds it already (a copy of this Resume ran); 0
-- otherwise. Commands still on their way with the old token (a renewal
-- of the detached lock, a second Resume of the same Ownership) find it
-- held by another and change nothing. A waiter's mark stays.
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
if not seq then
  -- A copy sent again after its connection closed: the resuming token is
  -- this Resume's alone, so finding it means a copy ran. It changes
  -- nothing.
  if grantOf(v, ARGV[3]) then return 1 end
  return 0
end
redis.call('set', KEYS[1], grantValue(ARGV[3], 0, marked), 'px', ARGV[2])
return 1
