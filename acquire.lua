-- KEYS[1] lock key, KEYS[2] fence counter of the lock's hash slot
-- ARGV[1] owner token, ARGV[2] lease in milliseconds
-- Returns the new fence (> 0) when the lock was taken, or
-- -1 - (the holder's remaining lease in ms) when someone else holds it.
if not redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then
  if redis.call('get', KEYS[1]) ~= ARGV[1] then
    local pttl = redis.call('pttl', KEYS[1])
    if pttl < 0 then pttl = 0 end
    return -1 - pttl
  end
  -- An earlier attempt of the same Acquire took the lock but its reply was
  -- lost: the caller never saw that fence, so take the lock anew.
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
end
-- The counter never goes below the server clock in microseconds, so fences
-- keep rising after a restart without persistence or a failover that lost
-- the last increments.
local fence = redis.call('incr', KEYS[2])
local t = redis.call('time')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
if fence < tonumber(now) then
  redis.call('set', KEYS[2], now)
  return tonumber(now)
end
return fence
