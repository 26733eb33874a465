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

-- The clean-up of an attempt whose reply was lost (Locker.cleanupLost)
-- lets go of the key if that attempt took it, and buries the attempt's
-- token: a member of the key's lost set (P{K}:lost, beside the lock key),
-- scored by the server ms until which it lasts (one lease of the
-- attempt). A copy of the attempt that reaches Redis later still (held
-- up in the network) finds it and changes nothing: it takes no key,
-- leaves no bid and queues nobody (acquire.lua, acquire_fair.lua,
-- multi_acquire.lua). Its waiter gave the attempt up before the clean-up,
-- and never sends that token again, so refusing it loses nobody anything;
-- without it, a copy that lands after its waiter gave up or was served
-- would hold the key, for nobody, a whole lease. Checking is one ZSCORE,
-- burying one ZADD after dropping those that ran out: cheap however many
-- replies a stall lost.

-- buried reports whether token's attempt was buried in lost.
local function buried(lost, token)
  return redis.call('zscore', lost, token) ~= false
end

-- bury buries token's attempt in lost for life ms from now (server ms).
local function bury(lost, token, life, now)
  redis.call('zremrangebyscore', lost, '-inf', now)
  redis.call('zadd', lost, now + life, token)
  if redis.call('pttl', lost) < life then
    redis.call('pexpire', lost, life)
  end
end
