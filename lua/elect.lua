-- KEYS[1] the election's lock key, KEYS[2] its leader record (the lock key
-- and ':leader', in the same slot; also the channel of leader changes)
-- ARGV[1] owner token, ARGV[2] the term's fence, ARGV[3] the leader's value
-- Returns 1 when the token holds the lock, and the record now names it:
-- "<fence>:<token>:<value>", published as "<fence>:<value>"; 0 when the
-- token does not hold the lock, and nothing changed.
-- The token is the term's grant (grant.lua): a hand-off to the next
-- candidate gives it a token of its own, so a Proclaim of a term that has
-- ended, however late it comes, changes nothing.
if not grantOf(redis.call('get', KEYS[1]), ARGV[1]) then
  return 0
end
redis.call('set', KEYS[2], ARGV[2] .. ':' .. ARGV[1] .. ':' .. ARGV[3])
-- Best-effort, as every notice (release.lua): observers also re-read.
redis.pcall('publish', KEYS[2], ARGV[2] .. ':' .. ARGV[3])
return 1
