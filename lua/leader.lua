-- KEYS[1] the election's lock key, KEYS[2] its leader record
-- Returns {fence, value} of the leader in office: the record names the
-- token that holds the lock. Returns nil when there is none: the lock is
-- free (its holder resigned, or its lease ran out), or its holder has not
-- recorded itself yet and the record is a former leader's.
-- The record is "<fence>:<token>:<value>"; a token may hold colons (its
-- Options.Owner part), so the token is matched whole, not split at ':'.
local v = redis.call('get', KEYS[1])
local r = redis.call('get', KEYS[2])
if not v or not r then
  return false
end
-- The holder's token: the value up to its change number (grant.lua).
local bar = string.find(v, '|', 1, true)
if not bar then
  return false
end
v = string.sub(v, 1, bar - 1)
local a = string.find(r, ':', 1, true)
local b = a + #v + 1
if string.sub(r, a + 1, b - 1) ~= v or string.sub(r, b, b) ~= ':' then
  return false
end
return {string.sub(r, 1, a - 1), string.sub(r, b + 1)}
