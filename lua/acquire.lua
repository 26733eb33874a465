-- KEYS[1] lock key (also the channel of its notices), KEYS[2] fence counter
-- of the lock's hash slot
-- ARGV[1] owner token, ARGV[2] lease in milliseconds; and for an attempt
-- of a waiting Acquire, ARGV[3] how many fences to reserve (>= 1: the
-- Locker may hand the lock on to that many holders in turn, see
-- wait_handoff.go), ARGV[4] the caller's Locker id, ARGV[5] '1'; and when
-- the Locker takes part in grants at release (bids.lua), KEYS[3] the key's
-- bids, KEYS[4] its lost set (claim.lua) and ARGV[6] and on the tokens of the waiter's earlier attempts that
-- may have left a bid, or '' for none; such an attempt whose token a
-- clean-up buried (claim.lua) changes nothing
-- Returns the fence when the lock was taken with one, {first, last}
-- reserved fence when with more, or
-- -1 - (the holder's remaining lease in ms) when someone else holds it,
-- as {-1 - lease, the holder's value} when that names an owner ('~').
--
-- The lock's value is the grant's token and change number (grant.lua),
-- with '*' appended once a waiter that waits for a release notice found it
-- busy: only then does the release publish one (release.lua).
-- bidOf reports whether v is an unused grant to one of the earlier
-- tokens ARGV[6..].
local function bidOf(v)
  for i = 6, #ARGV do
    if ARGV[i] ~= '' and grantOf(v, ARGV[i]) == 0 then return true end
  end
  return false
end
if ARGV[6] and buried(KEYS[4], ARGV[1]) then
  -- A copy of an attempt that its waiter gave up for lost, come after
  -- the clean-up (claim.lua): nobody reads this reply.
  return -1
end
if not redis.call('set', KEYS[1], ARGV[1] .. '|0', 'nx', 'px', ARGV[2]) then
  local v = redis.call('get', KEYS[1])
  local seq = grantOf(v, ARGV[1])
  if seq then
    -- A copy of this attempt ran already (sent again after its connection
    -- closed), so the caller never saw that fence: take the lock anew. A
    -- copy that comes after the holder changed the lease changes nothing
    -- of it (the holder's change is later).
    if seq == 0 then redis.call('set', KEYS[1], v, 'px', ARGV[2]) end
  elseif ARGV[6] and bidOf(v) then
    -- A release granted the key to the bid of one of this waiter's
    -- earlier attempts (bids.lua): this attempt claims it, told by the
    -- grant's notice or not (a lost notice), with a grant of its own:
    -- its token, its lease and a fence from the counter. The earlier
    -- grant, never used, ends.
    redis.call('set', KEYS[1], ARGV[1] .. '|0*', 'px', ARGV[2])
  elseif ARGV[5] == '1' and v == 'y:' .. ARGV[4] then
    -- Another Locker let the lock go to make way for this one's waiters
    -- (wait_handoff.go), because it had heard them, and maybe others, ask.
    redis.call('set', KEYS[1], ARGV[1] .. '|0*', 'px', ARGV[2])
  else
    if ARGV[5] == '1' then
      if string.sub(v, -1) ~= '*' and string.sub(v, 1, 2) ~= 'y:' then
        redis.call('append', KEYS[1], '*')
      end
      -- Tell the holder's Locker that a waiter elsewhere wants the lock.
      -- Best-effort, as every notice (release.lua).
      redis.pcall('publish', KEYS[1], '*' .. ARGV[4])
    end
    local pttl = redis.call('pttl', KEYS[1])
    -- A lease with under a ms left reads 0: the waiter looks again in a
    -- ms, not at its recheck (0 says nothing of when the holder goes).
    if pttl == 0 then pttl = 1 elseif pttl < 0 then pttl = 0 end
    if ARGV[6] then
      -- Offer to take the key when it is released (bids.lua).
      local t = redis.call('time')
      placeBid(KEYS[3], ARGV[4], ARGV[1], ARGV[2], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    end
    -- A holder that named itself (Options.Owner, after '~' in its token)
    -- is named to the waiter.
    if string.find(v, '~', 1, true) then
      return {-1 - pttl, v}
    end
    return -1 - pttl
  end
end
-- The key is taken: a bid this waiter left is spent.
if ARGV[6] then
  local b = redis.call('hget', KEYS[3], ARGV[4])
  if b then
    local _, _, token = parseBid(b)
    if token == ARGV[1] then
      redis.call('hdel', KEYS[3], ARGV[4])
    else
      for i = 6, #ARGV do
        if token == ARGV[i] then
          redis.call('hdel', KEYS[3], ARGV[4])
          break
        end
      end
    end
  end
end
-- The fence counter never goes below the server clock in microseconds, so
-- fences keep rising after a restart without persistence or a failover
-- that lost the last increments. The common case costs one write: set the
-- counter to the clock (plus the reserved block), and only if it was ahead,
-- set it above that. A counter ahead of the clock reserves no block, so
-- reservations never carry it more than a block ahead of the clock
-- (takeFences, bids.lua).
local n = tonumber(ARGV[3]) or 1
local first, last = takeFences(KEYS[2], n, redis.call('time'))
if first == last then return first end
return {first, last}
