-- Shared by the scripts of the default mode that take part in a grant at
-- release (wait_bid.go), which Go prepends it to after grant.lua
-- (store_scripts.go).
--
-- A bid is a waiting Acquire's offer to take the lock the moment it is
-- released. An attempt of a waiting Acquire that finds the key held leaves
-- one (and so does the release of its Locker that grants the key to
-- another Locker's waiter, for its own next waiter: release.lua) in the
-- key's bids hash (P{K}:bids, beside the lock key) under its
-- Locker's id: "<ms registered> <lease ms> <token>", the token being
-- that attempt's own. Only the first waiter of a Locker tries Redis, so a
-- Locker has one bid per key. A release (release.lua) grants the key to
-- the bid of the Locker next in turn, in the script that checked the
-- releasing token: the bid's token holds the key for a claim window
-- (claim.lua), and the notice "g<ms> <token>" wakes its waiter, whose
-- next attempt claims the grant (acquire.lua). Other waiters learn from
-- the notice when the grant ends if nobody claims it.
--
-- A bid is one grant: granting deletes it, and every later attempt of the
-- same waiter replaces it with its own token. A bid registered bidLife
-- ago or more is not granted (claim.lua). The hash expires with the
-- longest lease a bid asked for.

-- takeFences reserves n fences from the counter of the lock's slot and
-- returns the first and the last: never below the server clock t in µs,
-- so fences keep rising after a restart that lost the counter (acquire.lua).
local function takeFences(counter, n, t)
  local first = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last
  if n == 1 then
    -- The clock in µs as digits, without formatting a number.
    last = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  else
    last = string.format('%d', first + n - 1)
  end
  local old = tonumber(redis.call('set', counter, last, 'get'))
  if old and old >= first then
    first, n = old + 1, 1
    redis.call('set', counter, string.format('%d', first))
  end
  return first, first + n - 1
end

-- parseBid returns a bid's registration time, lease and token; nil for a
-- value that is not a bid.
local function parseBid(b)
  local at, ttl, token = string.match(b, '^(%d+) (%d+) (.+)$')
  if not at then return nil end
  return tonumber(at), tonumber(ttl), token
end

-- placeBid records the bid of locker's waiter: its attempt's token and
-- lease, at now (ms of the server clock).
local function placeBid(bids, locker, token, ttl, now)
  redis.call('hset', bids, locker, now .. ' ' .. ttl .. ' ' .. token)
  if redis.call('pttl', bids) < tonumber(ttl) then
    redis.call('pexpire', bids, ttl)
  end
end

-- dropBid deletes locker's bid if it names token.
local function dropBid(bids, locker, token)
  local b = redis.call('hget', bids, locker)
  if b then
    local _, _, bidToken = parseBid(b)
    if bidToken == token then redis.call('hdel', bids, locker) end
  end
end

-- grantBid gives the key lock, which the caller has just freed, to the
-- bid of the Locker next in turn after self: the smallest id above it,
-- else the smallest (self's own bid last), skipping, and deleting, bids
-- placed bidLife ago or more. The grant holds the key for the claim
-- window (or the bid's lease, if shorter) until its waiter claims it.
-- It returns the server time (ms) and the id of the Locker whose bid it
-- granted, or false when it granted none.
local function grantBid(lock, bids, self)
  -- HKEYS and HGET, not HGETALL: the commands docs/acl.md grants already.
  local ids = redis.call('hkeys', bids)
  if #ids == 0 then return false end
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local pick, ttl, token
  for _, id in ipairs(ids) do
    local at, bttl, btoken = parseBid(redis.call('hget', bids, id) or '')
    if not at or now - at >= bidLife then
      redis.call('hdel', bids, id)
    elseif not pick or ((id > self) ~= (pick > self) and id > self) or ((id > self) == (pick > self) and id < pick) then
      pick, ttl, token = id, bttl, btoken
    end
  end
  if not pick then return false end
  redis.call('hdel', bids, pick)
  -- Marked: waiters of other Lockers may still wait, so the grantee's
  -- release looks for them.
  local px = math.min(ttl, claimWindow)
  redis.call('set', lock, token .. '|0*', 'px', px)
  -- Best-effort, as every notice (release.lua): a lost one is made good
  -- by the waiter's next attempt, or the grant ends within px.
  redis.pcall('publish', lock, 'g' .. px .. ' ' .. token)
  return now, pick
end
