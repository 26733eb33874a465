-- Shared by the scripts that hand out permits and read-write holds, which
-- Go prepends it to (store_hold_scripts.go).

-- nowMs returns the server clock in ms, and the raw TIME reply.
local function nowMs()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end

-- holdUntil records in the sorted set holders that member holds until
-- now + lease, and keeps the set's own expiry at least that far out, so
-- the set outlives every live member and vanishes with the last one.
local function holdUntil(holders, member, now, lease)
  redis.call('zadd', holders, now + lease, member)
  if redis.call('pttl', holders) < lease then
    redis.call('pexpire', holders, lease)
  end
end

-- enqueue puts token in queue (entries "<deadline ms>:<token>", oldest
-- first) until deadline: a new entry goes last, an existing one keeps
-- its place and takes the new deadline. The list expires with its
-- latest deadline.
local function enqueue(queue, token, deadline, now)
  local entry = deadline .. ':' .. token
  local found = false
  for i, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    if isPlace(e, token) then
      redis.call('lset', queue, i - 1, entry)
      found = true
      break
    end
  end
  if not found then redis.call('rpush', queue, entry) end
  local ttl = deadline - now
  if redis.call('pttl', queue) < ttl then
    redis.call('pexpire', queue, ttl)
  end
end

-- queueAt returns the position of token among the live entries of queue
-- (those whose deadline has not passed), or the number of live entries
-- when token has none; and the token of the live entry at index want
-- (0-based), if any.
local function queueAt(queue, token, now, want)
  local pos, found, at = 0, nil, nil
  for _, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    local sep = string.find(e, ':', 1, true)
    if tonumber(string.sub(e, 1, sep - 1)) >= now then
      local tok = string.sub(e, sep + 1)
      if pos == want then at = tok end
      if tok == token and not found then found = pos end
      pos = pos + 1
    end
  end
  return found or pos, at
end

