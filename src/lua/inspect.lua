--[[
  inspect: a consistent snapshot of one lock, for operators (read-only).

  KEYS[1]  lock key    string: the holder's token
  KEYS[2]  fence key   string: the last fence issued
  KEYS[3]  queue key   sorted set: queued waiters (entries of dead waiters count until cleaned)
  KEYS[4]  holder key  hash: token, who, since (see record-holder.lua)

  Returns
    {token or false, pttl, last fence or false, queued, who or false, since or false}
    pttl is -2 when the lock is free, -1 when it has no expiry. who and since are given only
    when the holder key describes the current token. The token is for Locks.forceRelease and
    is never shown.
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local token = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local queued = redis.call('ZCARD', KEYS[3])
local who, since = false, false
if token then
  local recorded = redis.call('HMGET', KEYS[4], 'token', 'who', 'since')
  if recorded[1] == token then
    who, since = recorded[2], recorded[3]
  end
end
return {token, pttl, fence, queued, who, since}
