-- KEYS[1..n] lock keys (each also the channel of its release notices), all
-- in one hash slot
-- ARGV[1] owner token, ARGV[2] n characters: '1' at i to publish a release
-- notice for KEYS[i] even when no waiter marked it (the releasing Locker
-- has waiters of its own for it); and for the rollback of an attempt
-- whose reply was lost, ARGV[3] how long to bury its token (claim.lua),
-- in ms, in KEYS[n+1], the lost set of KEYS[1]
-- Returns {r1, ..., rn}: ri is 1 when the token held KEYS[i], which is now
-- deleted, and 0 when it did not (that key was lost), untouched.
-- Notices are best-effort (pcall), as in release.lua.
local out = {}
local n = #KEYS
if ARGV[3] then
  n = n - 1
  local t = redis.call('time')
  bury(KEYS[n + 1], ARGV[1], tonumber(ARGV[3]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
for i = 1, n do
  local seq, marked = grantOf(redis.call('get', KEYS[i]), ARGV[1])
  if seq then
    redis.call('del', KEYS[i])
    if marked or string.sub(ARGV[2], i, i) == '1' then
      redis.pcall('publish', KEYS[i], '')
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
