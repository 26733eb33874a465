-- Shared by every script that reads a lock key's value, which Go prepends
-- it to (store_scripts.go).
--
-- A lock key holds "<token>|<n>": the token of the grant that holds it
-- (one per acquiring attempt, hand-off and resume: a grant's token is
-- never reused, so whatever arrives late from an earlier grant names a
-- stranger), and n, the number of the last lease change Redis applied to
-- it. A change numbered below n is refused: a late one never overrides a
-- later one. '*' is appended once a waiter asked for a release notice
-- (acquire.lua). A yielding release leaves "y:<Locker id>" instead
-- (wait_handoff.go).
--
-- A value that is a bare token (22 base64url characters, then nothing, '*'
-- or '~' and an owner) was written by an older padlock sharing the key
-- prefix: the scripts stop with an error rather than guess. Any other
-- value is someone else's, and the lock busy.

-- grantOf returns, when v is token's, the number of the last lease change
-- applied to it and whether a waiter marked it; nil when v is not token's.
local function grantOf(v, token)
  if not v then return nil end
  local n = #token + 1
  if string.sub(v, 1, n) ~= token .. '|' then
    local old = string.match(v, '^[%w_-]+')
    if old and #old == 22 and not string.find(v, '|', 1, true) then
      local c = string.sub(v, 23, 23)
      if c == '' or c == '*' or c == '~' then
        error('padlock: a lock key holds a value of an older padlock format; versions must not share a key prefix')
      end
    end
    return nil
  end
  local s = string.sub(v, n + 1)
  local marked = string.sub(s, -1) == '*'
  if marked then s = string.sub(s, 1, -2) end
  return tonumber(s), marked
end

-- grantValue returns the value that stores token with change number seq,
-- marked as before.
local function grantValue(token, seq, marked)
  if marked then return token .. '|' .. seq .. '*' end
  return token .. '|' .. seq
end
