-- KEYS[1] the election's lock key, KEYS[2] its leader record
-- Returns {fence, value} of the leader in office: the record names the
-- token that holds the lock. Returns nil when there is none: the lock is
-- free (its holder resigned, or its lease ran out), or its holder has not
-- recorded itself yet and the record is a former leader's.
local v = redis.call('get', KEYS[1])
local r = redis.call('get', KEYS[2])
if not v or not r then
  return false
end
local a = string.find(r, ':', 1, true)
local b = string.find(r, ':', a + 1, true)
local tok = string.sub(r, a + 1, b - 1)
if v ~= tok and v ~= tok .. '*' then
  return false
end
return {string.sub(r, 1, a - 1), string.sub(r, b + 1)}
