-- KEYS[1] the election's leader record
-- ARGV[1] owner token of the resigning leader
-- Deletes the record when it names the token, so that nobody reads the
-- resigning leader as in office once its lock is released. Returns 1 when
-- it did, 0 otherwise.
-- The record is "<fence>:<token>:<value>"; a token may hold colons (its
-- Options.Owner part), so the token is matched whole, not split at ':'.
local r = redis.call('get', KEYS[1])
if not r then
  return 0
end
local a = string.find(r, ':', 1, true)
local b = a + #ARGV[1] + 1
if string.sub(r, a + 1, b - 1) ~= ARGV[1] or string.sub(r, b, b) ~= ':' then
  return 0
end
redis.call('del', KEYS[1])
return 1
