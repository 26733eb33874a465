-- KEYS[1] lock key (also the channel of its notices), KEYS[2] fence counter
-- of the lock's hash slot
-- ARGV[1] owner token, ARGV[2] lease in milliseconds, ARGV[3] how many fences
-- to reserve (>= 1: the Locker may hand the lock on to that many holders in
-- turn, see handoff.go), ARGV[4] the caller's Locker id, ARGV[5] '1' when the
-- caller will wait for a release if the lock is busy
-- Returns the first reserved fence (> 0) when the lock was taken, or
-- -1 - (the holder's remaining lease in ms) when someone else holds it.
if not redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then
  local v = redis.call('get', KEYS[1])
  -- A Locker that let the lock go to make way for another Locker's waiters
  -- leaves a short-lived "y:<that Locker's id>" marker: only they may
  -- take it.
  local yielded = v == 'y:' .. ARGV[4]
  if v ~= ARGV[1] and not yielded then
    if ARGV[5] == '1' then
      -- Tell the holder's Locker that a waiter elsewhere wants the lock.
      redis.call('publish', KEYS[1], '*' .. ARGV[4])
    end
    local pttl = redis.call('pttl', KEYS[1])
    if pttl < 0 then pttl = 0 end
    return -1 - pttl
  end
  -- Either the lock was yielded to us, or an earlier attempt of the same
  -- Acquire took it but its reply was lost, so the caller never saw that
  -- fence: take the lock anew.
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
end
-- The counter never goes below the server clock in microseconds, so fences
-- keep rising after a restart without persistence or a failover that lost
-- the last increments.
local n = tonumber(ARGV[3])
local first = redis.call('incrby', KEYS[2], n) - n + 1
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if first < now then
  redis.call('set', KEYS[2], string.format('%d', now + n - 1))
  return now
end
return first
