-- KEYS[1..n] lock keys (each also the channel of its notices), all in one
-- hash slot; KEYS[n+1] the fence counter of that slot
-- ARGV[1] owner token, ARGV[2] lease in milliseconds, ARGV[3] the caller's
-- Locker id, ARGV[4] '1' for an attempt of a waiting AcquireAll, '2' for
-- one that also names, as KEYS[n+2], the lost set of KEYS[1], where a
-- rollback may have buried it (claim.lua: then it takes nothing), and
-- optionally ARGV[5] the token of a lock the caller holds on one of the
-- keys (a waiting AcquireAll waits for a busy key as a single-key Acquire
-- does, multilock.go): that key is taken over by the set
-- Returns {fence of KEYS[1], ..., fence of KEYS[n]} when every key was
-- taken, or {-1 - (the holder's remaining lease in ms), i} when KEYS[i] is
-- held by another owner: then no lock was taken or changed (a waiting
-- attempt only marks KEYS[i], as acquire.lua does, so its release sends a
-- notice).
--
-- All or none: every key is checked before any is set, and a script runs
-- alone, so nobody sees part of the set taken.
local n = #KEYS - 1
local tok = ARGV[1]
local waiting = ARGV[4] == '1' or ARGV[4] == '2'
if ARGV[4] == '2' then
  n = #KEYS - 2
  if buried(KEYS[#KEYS], tok) then
    -- A copy of an attempt that its waiter gave up for lost, come after
    -- the rollback: nobody reads this reply.
    return {-1, 1}
  end
end
local take = {}
for i = 1, n do
  local v = redis.call('get', KEYS[i])
  local seq, marked = grantOf(v, tok)
  if not v then
    take[i] = tok .. '|0'
  elseif seq then
    -- Ours already: a copy of this attempt ran (sent again after its
    -- connection closed), maybe marked by a waiter since.
    take[i] = grantValue(tok, seq, marked)
  elseif ARGV[5] and grantOf(v, ARGV[5]) then
    -- The caller's own lock on it, which the set takes over: one grant
    -- ends, the set's begins.
    local _, m = grantOf(v, ARGV[5])
    take[i] = grantValue(tok, 0, m)
  elseif waiting and v == 'y:' .. ARGV[3] then
    -- Let go for this Locker's waiters (wait_handoff.go).
    take[i] = tok .. '|0*'
  else
    if waiting then
      if string.sub(v, -1) ~= '*' and string.sub(v, 1, 2) ~= 'y:' then
        redis.call('append', KEYS[i], '*')
      end
      -- Best-effort, as every notice (release.lua).
      redis.pcall('publish', KEYS[i], '*' .. ARGV[3])
    end
    local pttl = redis.call('pttl', KEYS[i])
    -- A lease with under a ms left reads 0: the waiter looks again in a
    -- ms, not at its recheck (0 says nothing of when the holder goes).
    if pttl == 0 then pttl = 1 elseif pttl < 0 then pttl = 0 end
    return {-1 - pttl, i}
  end
end
for i = 1, n do
  redis.call('set', KEYS[i], take[i], 'px', ARGV[2])
end
-- One fence per key from the slot's counter, which never goes below the
-- server clock in microseconds (acquire.lua), so each is above every
-- earlier holder's fence for the same key.
local t = redis.call('time')
local first = tonumber(t[1]) * 1000000 + tonumber(t[2])
local old = tonumber(redis.call('get', KEYS[n + 1]))
if old and old >= first then first = old + 1 end
redis.call('set', KEYS[n + 1], string.format('%d', first + n - 1))
local fences = {}
for i = 1, n do fences[i] = first + i - 1 end
return fences
