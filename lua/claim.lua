-- Shared by the scripts that grant a key at release or keep a fair queue
-- (bids.lua, queue_head.lua), which Go prepends it to (store_scripts.go;
-- wait_claim.go keeps the same numbers).
--
-- A grant at release is an offer, not a lock. The release sets the key to
-- the token of the bid it grants with a first lease of at most
-- claimWindow ms, and its notice only wakes the waiter: the waiter's next
-- attempt, which names that token, claims the grant in Redis, with its
-- own token, lease and fence (acquire.lua, acquire_fair.lua). The reply
-- to that attempt is the evidence: nothing a reader of the keys could
-- publish makes a holder or a fence. A grant nobody claims (its waiter
-- died, gave up, or forgot the token: a late copy of its attempt) ends
-- on its own within claimWindow, not a lease.
--
-- A bid, or a fair queue entry's bid, placed bidLife ms ago or more is
-- not granted, and a fair entry whose bid is that old leaves the queue: a
-- live waiter places its bid again at least every second
-- (acquisition.sleep), so only a waiter that is gone has one so old.
local claimWindow = 500
local bidLife = 2000
