--[[
  compat-extend: move a held compat lease's expiry timestamp to now + ttl, only if the lock
  still holds the caller's lease (see compat-acquire.lua for what "holds" means in this mode)
  and its timestamp has not passed: once it has, a legacy client may already be taking it over
  (its GET saw the old value), so the lease is over. Never recreates a key that is gone.

  KEYS[1]  lock key    string: the legacy lock key, an expiry timestamp
  KEYS[2]  owner key   string: the token of the latchkey lease that wrote KEYS[1]
  ARGV[1]  token       token of the lease being extended
  ARGV[2]  ttl         new time to live, milliseconds, positive integer (counted from now)
  ARGV[3]  unit        milliseconds per unit of the timestamp: "1" or "1000"
  ARGV[4]  linger      how long the keys outlive the timestamp, milliseconds

  Returns
     1  extended: KEYS[1] = ceil((now + ttl) / unit), both keys expire linger ms after it passes
     0  not held: the key is gone, or the lease's timestamp has passed
    -1  not held: the key was written by someone else (a legacy SETNX or GETSET, which leave no
        expiry on it, or another latchkey lease)
  Errors
    WRONGTYPE  KEYS[1] or KEYS[2] holds a value that is not a string.
]]
local lockKey, ownerKey = KEYS[1], KEYS[2]
local unit, linger = tonumber(ARGV[3]), tonumber(ARGV[4])
local current = redis.call('GET', lockKey)
if not current then
  return 0
end
if redis.call('GET', ownerKey) ~= ARGV[1] or redis.call('PTTL', lockKey) < 0 then
  return -1
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if nowMs > (tonumber(current) + 1) * unit - 1 then
  return 0
end
local value = math.floor((nowMs + tonumber(ARGV[2]) + unit - 1) / unit)
local px = (value + 1) * unit - nowMs + linger
redis.call('SET', lockKey, string.format('%.0f', value), 'PX', px)
redis.call('PEXPIRE', ownerKey, px)
return 1
