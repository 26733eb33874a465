-- KEYS[1] the holder's key: the readers' sorted set for a reader, the
-- writer key for a writer; KEYS[2] fence counter (unused; listed so all
-- keys share one slot), KEYS[3] the queue of waiting writers
-- ARGV[1] holder token (or a waiting writer's place, giving up), ARGV[2] 'r' for
-- a reader, 'w' for the writer, 'q' for a writer that stops waiting,
-- ARGV[3] the lock's channel (the readers' key)
-- Returns 1 when the token held the lock and let it go (or, giving up,
-- was queued), 0 otherwise.
--
-- The notice names the oldest live waiting writer when the lock is now
-- free for it; an empty notice, when no writer waits, wakes the readers.
-- The last reader leaving with no writer waiting has nobody to wake.
-- Best-effort, as every notice (release.lua).
local now = nowMs()
local done, free = false, true
if ARGV[2] == 'r' then
  local s = redis.call('zscore', KEYS[1], ARGV[1])
  if s ~= false then
    redis.call('zrem', KEYS[1], ARGV[1])
    done = tonumber(s) > now
  end
  redis.call('zremrangebyscore', KEYS[1], '-inf', now)
  free = redis.call('zcard', KEYS[1]) == 0
elseif ARGV[2] == 'w' then
  if grantOf(redis.call('get', KEYS[1]), ARGV[1]) then
    redis.call('del', KEYS[1])
    done = true
  end
else
  done = dequeue(KEYS[3], ARGV[1])
end
local head = liveHead(KEYS[3], now)
if head and free then
  redis.pcall('publish', ARGV[3], head)
elseif not head and ARGV[2] ~= 'r' then
  redis.pcall('publish', ARGV[3], '')
end
if done then return 1 end
return 0
