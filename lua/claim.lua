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

-- The clean-up of an attempt whose reply was lost (Locker.cleanup) lets go
-- of the key if that attempt took it, and buries the attempt's token: a
-- field "x:<token>" in the key's bids hash, holding the server ms until
-- which it lasts (one lease of the attempt). A copy of the attempt that
-- reaches Redis later still (held up in the network) finds it and takes
-- no key (acquire.lua, acquire_fair.lua; in the default mode it leaves no
-- bid either, and a fair one that finds the key held queues an entry
-- whose bid is never placed again, so it leaves within bidLife). Its
-- waiter gave the attempt up before the clean-up, and never sends that
-- token again, so refusing it loses nobody anything; without it, a copy
-- that lands after its waiter gave up or was served would hold the key,
-- for nobody, a whole lease. grantBid skips tombstones, and it and bury
-- delete those that ran out.

-- buried reports whether token's attempt was buried in bids.
local function buried(bids, token)
  return redis.call('hget', bids, 'x:' .. token) ~= false
end

-- tombstone reports whether the field id of a bids hash is a tombstone.
local function tombstone(id)
  return string.sub(id, 1, 2) == 'x:'
end

-- bury buries token's attempt in bids for life ms from now (server ms).
-- Past a few fields it deletes the tombstones that ran out, so that lost
-- replies coming faster than a lease apart never grow the hash without
-- bound (in fair mode, nothing else reads it).
local function bury(bids, token, life, now)
  if redis.call('hlen', bids) >= 16 then
    for _, id in ipairs(redis.call('hkeys', bids)) do
      if tombstone(id) and (tonumber(redis.call('hget', bids, id)) or 0) <= now then
        redis.call('hdel', bids, id)
      end
    end
  end
  redis.call('hset', bids, 'x:' .. token, string.format('%d', now + life))
  if redis.call('pttl', bids) < life then
    redis.call('pexpire', bids, life)
  end
end
