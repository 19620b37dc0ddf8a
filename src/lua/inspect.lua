--[[
  inspect: a consistent snapshot of one lock, for operators (read-only).

  KEYS[1]  lock key    string: the holder's token
  KEYS[2]  fence key   string: the last fence issued
  KEYS[3]  queue key   sorted set: queued waiters (entries of dead waiters count until cleaned)

  Returns
    {token or false, pttl, last fence or false, queued}
    pttl is -2 when the lock is free, -1 when it has no expiry. The token is for
    Locks.forceRelease and for its tag (who holds it: see register-holder.lua); it is never shown.
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local token = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local queued = redis.call('ZCARD', KEYS[3])
return {token, pttl, fence, queued}
