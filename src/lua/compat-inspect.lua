--[[
  compat-inspect: a consistent snapshot of one compat lock, for operators (read-only). The lock
  is held while its timestamp is in the future by the Redis server's clock, by a latchkey lease
  (the owner key holds its token and the lock key has an expiry: see compat-acquire.lua) or by a
  legacy client.

  KEYS[1]  lock key    string: the legacy lock key, an expiry timestamp
  KEYS[2]  owner key   string: the token of the latchkey lease that wrote KEYS[1]
  KEYS[3]  fence key   string: the last fence issued (latchkey leases only)
  KEYS[4]  queue key   sorted set: queued latchkey waiters
  ARGV[1]  unit        milliseconds per unit of the timestamp: "1" or "1000"

  Returns
    {token or false, ms, last fence or false, queued}
    token is the latchkey lease's token, or "legacy:<value>" for a legacy holder (which
    compat-release.lua accepts for Locks.forceRelease); false when free (no key, or a timestamp
    in the past). ms is the time until the timestamp passes. Who holds it: from the token's tag
    (see register-holder.lua); a legacy holder has none.
  Errors
    "ERR latchkey: ... not a timestamp"  KEYS[1] holds something else.
    "ERR latchkey: ... a Unix time in seconds|milliseconds"  KEYS[1] holds a timestamp of the
                other unit: the compat mode does not match the legacy services.
    WRONGTYPE  one of the keys holds a value of another type.
]]
local lockKey = KEYS[1]
local unit = tonumber(ARGV[1])
local current = redis.call('GET', lockKey)
local fence = redis.call('GET', KEYS[3])
local queued = redis.call('ZCARD', KEYS[4])
local token, ms = false, 0
if current then
  if not string.match(current, '^%d+$') then
    return redis.error_reply('ERR latchkey: the lock key ' .. lockKey .. ' holds "' .. string.sub(current, 1, 40) .. '", not a timestamp')
  end
  -- A timestamp of the other unit (Unix seconds have 10 digits from 2001 to 5138, milliseconds 13
  -- after 1973) would be read as 1970 or as the year 55,000: a `compat` mode that does not match
  -- the legacy services lets a latchkey lease and a legacy one hold the lock together. Refused,
  -- nothing written. (A small value, "0" say, is an expired timestamp in either unit.)
  local n = tonumber(current)
  if (unit == 1 and n >= 1e9 and n < 1e11) or (unit ~= 1 and n >= 1e11) then
    local theirs, mode = 'seconds', 'timestamp-seconds'
    if unit ~= 1 then theirs, mode = 'milliseconds', 'timestamp' end
    return redis.error_reply('ERR latchkey: the lock key ' .. lockKey .. ' holds ' .. current .. ', a Unix time in ' .. theirs .. ": give createLocks({ compat: '" .. mode .. "' })")
  end
  local time = redis.call('TIME')
  local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local heldUntil = (tonumber(current) + 1) * unit - 1
  if nowMs <= heldUntil then
    ms = heldUntil - nowMs
    if redis.call('PTTL', lockKey) >= 0 then
      token = redis.call('GET', KEYS[2])
    else
      token = 'legacy:' .. current
    end
  end
end
return {token, ms, fence, queued}
