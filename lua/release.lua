-- KEYS[1] lock key (also the channel of its release notices); and when
-- the Locker takes part in grants at release (bids.lua), KEYS[2] the fence
-- counter of the lock's slot (unused: listed so that attempts and
-- releases name the same keys) and KEYS[3] the key's bids
-- ARGV[1] the grant's token (grant.lua); optionally ARGV[2] '1' to publish a release notice
-- even when no waiter marked the lock (the releasing Locker has waiters of
-- its own), then ARGV[3] the releasing Locker's id when it takes part in
-- grants at release, else '', ARGV[4] '1' when ARGV[1] is an attempt's
-- whose bid, if it left one, is withdrawn, or 'x<ms>' when that
-- attempt's reply was lost: withdrawn, and buried for that many ms in
-- KEYS[4], the key's lost set (claim.lua), then ARGV[5] a yield window in ms and ARGV[6] the id of
-- the Locker to yield to (or both ''), then
-- optionally ARGV[7..8] the releasing Locker's next bid: the token of its
-- first waiter's next attempt and the lease in ms, with KEYS[4] the key's
-- lost set: a bid whose token is buried there is not placed (a release
-- held up in the network whose bid its Locker withdrew meanwhile, for
-- want of a reply: its waiters gave up)
-- Returns 1 when the token held the lock and it is now gone, 2 when it
-- was granted to another Locker's bid and ARGV[7]'s bid placed, 0
-- otherwise.
--
-- With bids, when a waiter asked (the lock is marked, or the releasing
-- Locker has waiters), the key goes straight to the bid of the Locker next
-- in turn (grantBid, bids.lua); a waiter that gives up, or the clean-up of
-- a lost attempt, withdraws its bid first. A Locker that gives the key to
-- another's waiter while waiters of its own wait bids for them in the
-- same script (ARGV[7..8]), and says so on the channel as an attempt
-- would ("*" and its id), instead of its first waiter's attempt doing
-- both a round trip later. Otherwise the notice is empty and wakes one waiter per
-- Locker. A yielding release leaves a "y:<Locker id>" marker for the window
-- instead of deleting the key: only that Locker's waiters may take the
-- lock meanwhile (acquire.lua).
-- Notices are best-effort, here and in every script: a server that refuses
-- one (a user without channel permissions) must not turn a release that
-- happened into an error, so PUBLISH runs in pcall and waiters fall back
-- to their timers.
local bids = ARGV[3] and ARGV[3] ~= ''
local lost = bids and string.sub(ARGV[4] or '', 1, 1) == 'x'
if bids and (ARGV[4] == '1' or lost) then dropBid(KEYS[3], ARGV[3], ARGV[1]) end
if lost then
  local t = redis.call('time')
  bury(KEYS[4], ARGV[1], tonumber(string.sub(ARGV[4], 2)), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
local v = redis.call('get', KEYS[1])
local seq, marked = grantOf(v, ARGV[1])
if not seq then
  return 0
end
if bids and (marked or ARGV[2] == '1') then
  local now, to = grantBid(KEYS[1], KEYS[3], ARGV[3])
  if now then
    if ARGV[7] and to ~= ARGV[3] and not buried(KEYS[4], ARGV[7]) then
      placeBid(KEYS[3], ARGV[3], ARGV[7], ARGV[8], now)
      redis.pcall('publish', KEYS[1], '*' .. ARGV[3])
      return 2
    end
    return 1
  end
end
if ARGV[5] and ARGV[5] ~= '' then
  redis.call('set', KEYS[1], 'y:' .. ARGV[6], 'px', ARGV[5])
else
  redis.call('del', KEYS[1])
end
if marked or ARGV[2] == '1' then
  redis.pcall('publish', KEYS[1], '')
end
return 1
