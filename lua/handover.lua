-- KEYS[1] lock key; and when the Locker takes part in grants at release
-- (bids.lua), KEYS[2] the key's bids
-- ARGV[1] token of the releasing grant, ARGV[2] token of the next grant,
-- ARGV[3] lease in milliseconds, ARGV[4] the change's number (grant.lua),
-- and with bids ARGV[5] the Locker's id
-- Returns 1 when the releasing token held the lock, which now belongs to
-- the next token with the lease reset (or the next token holds it
-- already: a copy of this hand-off ran); 0 otherwise, changing nothing.
--
-- A hand-off within a Locker (wait_handoff.go) is a grant of its own: the next
-- holder gets a token of its own, so that whatever is still on its way
-- from the releasing holder (a renewal, a Proclaim, a Resign) is a
-- stranger to it. It is also the round trip that confirms Redis still
-- holds the lock before it is passed on. A waiter's mark stays.
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
if not seq then
  -- A copy sent again after its connection closed (behind a proxy, the
  -- first copy may have run): the next token is this hand-off's alone,
  -- so finding it means the hand-off ran. It changes nothing.
  if grantOf(v, ARGV[2]) then return 1 end
  return 0
end
if tonumber(ARGV[4]) < seq then seq = seq + 1 else seq = ARGV[4] end
-- The Locker's bid was its first waiter's, which gets the lock now: spent.
if ARGV[5] then redis.call('hdel', KEYS[2], ARGV[5]) end
redis.call('set', KEYS[1], grantValue(ARGV[2], seq, marked), 'px', ARGV[3])
return 1
