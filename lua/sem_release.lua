-- KEYS[1] the semaphore's holders (also the channel of its notices),
-- KEYS[2] fence counter (unused; listed so all keys share one slot),
-- KEYS[3] fair-mode waiter queue
-- ARGV[1] permit token, ARGV[2] permits (N), ARGV[3] '1' for fair mode
-- ARGV[4] '1' when the waiter gives up instead (ARGV[1] is then a
-- waiter's place, not a holder's token)
-- Returns 1 when the token held a live permit and it is given back (or,
-- giving up, the waiter was queued), 0 otherwise.
--
-- The notice wakes one waiter: in fair mode the one the freed permit is
-- now promised to (the live waiter at index free-1 of the queue), else any
-- (an empty notice). Best-effort, as every notice (release.lua).
local now = nowMs()
local done
if ARGV[4] == '1' then
  done = dequeue(KEYS[3], ARGV[1])
else
  local s = redis.call('zscore', KEYS[1], ARGV[1])
  done = s ~= false and tonumber(s) > now
  if s ~= false then redis.call('zrem', KEYS[1], ARGV[1]) end
end
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
local free = tonumber(ARGV[2]) - redis.call('zcard', KEYS[1])
if free > 0 then
  local next = ''
  if ARGV[3] == '1' then
    local queued = queueAt(KEYS[3], '', now, -1)
    next = nil
    if queued > 0 then
      local _, at = queueAt(KEYS[3], '', now, math.min(free, queued) - 1)
      next = at
    end
  end
  if next then redis.pcall('publish', KEYS[1], next) end
end
if done then return 1 end
return 0
