--[[
  semaphore-extend: set a held permit lease's time to live again, only if it has not expired.
  Never brings back a lease that is gone.

  KEYS[1]  holders key sorted set: token -> expiry (server ms)
  KEYS[2]  permits key hash: token -> "<permits> <fence>", and "#used" -> permits in use
  ARGV[1]  token       the lease's token
  ARGV[2]  ttl         new time to live, milliseconds (counted from now)

  Returns
    1  extended
    0  not held: the lease expired or was released
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= nowMs then
  return 0
end
local expiresAt = nowMs + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', expiresAt, ARGV[1])
if redis.call('PTTL', KEYS[1]) < expiresAt - nowMs then
  redis.call('PEXPIRE', KEYS[1], expiresAt - nowMs)
  redis.call('PEXPIRE', KEYS[2], expiresAt - nowMs)
end
return 1
