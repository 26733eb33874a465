-- KEYS[1] lock key
-- ARGV[1] owner token, ARGV[2] lease in milliseconds
-- Returns 1 when the token now holds the lock with that lease, or
-- -1 - (the holder's remaining lease in ms) when someone else holds it,
-- as {-1 - lease, the holder's value} when that names an owner ('~', see
-- acquire.lua).
-- Redlock's one-node vote: unlike acquire.lua it keeps no fence counter,
-- since counters on independent nodes give no fence worth having.
if redis.call('set', KEYS[1], ARGV[1] .. '|0', 'nx', 'px', ARGV[2]) then
  return 1
end
local v = redis.call('get', KEYS[1])
local seq = grantOf(v, ARGV[1])
if seq then
  -- A copy of this attempt got this vote already (its reply was lost):
  -- vote again, with a fresh lease unless the holder changed it since.
  if seq == 0 then redis.call('pexpire', KEYS[1], ARGV[2]) end
  return 1
end
local pttl = redis.call('pttl', KEYS[1])
-- A lease with under a ms left reads 0: the waiter looks again in a
-- ms, not at its recheck (0 says nothing of when the holder goes).
if pttl == 0 then pttl = 1 elseif pttl < 0 then pttl = 0 end
if v and string.find(v, '~', 1, true) then
  return {-1 - pttl, v}
end
return -1 - pttl
