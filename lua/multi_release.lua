-- KEYS[1..n] lock keys (each also the channel of its release notices), all
-- in one hash slot; when the Locker takes part in grants at release
-- (bids.lua), KEYS[n+1..2n] their bids; and for the rollback of an attempt
-- whose reply was lost, last, the lost set of KEYS[1]
-- ARGV[1] owner token, ARGV[2] n characters: '1' at i to publish a release
-- notice for KEYS[i] even when no waiter marked it (the releasing Locker
-- has waiters of its own for it); ARGV[3] for the rollback of an attempt
-- whose reply was lost how long to bury its token (claim.lua), in ms, in
-- the lost set, else ''; and ARGV[4] the releasing Locker's id when it
-- takes part in grants at release
-- Returns {r1, ..., rn}: ri is 1 when the token held KEYS[i], which is now
-- let go, and 0 when it did not (that key was lost), untouched.
--
-- A key that a waiter asked for goes straight to the bid of the Locker
-- next in turn, as a single key's release does (release.lua, grantBid in
-- bids.lua), so that a set's release keeps the turns of the waiters of
-- its keys; otherwise it is deleted.
-- Notices are best-effort (pcall), as in release.lua.
local out = {}
local lost = ARGV[3] and ARGV[3] ~= ''
local self = ARGV[4] and ARGV[4] ~= '' and ARGV[4]
local n = #KEYS
if lost then n = n - 1 end
if self then n = n / 2 end
if lost then
  local t = redis.call('time')
  bury(KEYS[#KEYS], ARGV[1], tonumber(ARGV[3]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
for i = 1, n do
  local seq, marked = grantOf(redis.call('get', KEYS[i]), ARGV[1])
  if seq then
    local asked = marked or string.sub(ARGV[2], i, i) == '1'
    if not (self and asked and grantBid(KEYS[i], KEYS[n + i], self)) then
      redis.call('del', KEYS[i])
      if asked then
        redis.pcall('publish', KEYS[i], '')
      end
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
