--[[
  compat-acquire: take a lease on a lock shared with legacy services that still run the
  timestamp lock of the seed articles (SETNX lock <expiry>; GET, and GETSET to take over a lock
  whose timestamp is in the past; DEL to release). Used only with createLocks({ compat }).

  The lock key holds what those services expect: the lease's expiry as a Unix timestamp, a
  decimal integer in milliseconds (or seconds), with nothing else in it (they parse it with
  Long.valueOf / long.Parse). The check and the take are one atomic step here: the race between
  GET and GETSET that the legacy algorithm has to survive does not exist on latchkey's side.

  Expiry is judged by the Redis server's clock (TIME), the same for every latchkey client; the
  legacy services judge it by their own clocks, which is why this mode needs synchronised clocks.
  A timestamp W is held while now <= (W + 1) * unit - 1 (the legacy test is `now > W`).

  The value alone cannot tell our lease from a legacy one (timestamps collide), so ownership is
  two facts that only latchkey's scripts make true together: the owner key holds our token, and
  the lock key has an expiry (latchkey always writes it with PX; SETNX and GETSET, the only writes
  of the legacy algorithm, leave or make a key without one).

  KEYS[1]  lock key    string: the legacy lock key itself (no latchkey prefix or hash tag), an
                       expiry timestamp
  KEYS[2]  owner key   string: the token of the latchkey lease that wrote KEYS[1] (same expiry)
  KEYS[3]  fence key   string: the last fence issued for this lock (an integer)
  KEYS[4]  queue key   sorted set: latchkey waiters in arrival order (member: waiter, score: µs)
  KEYS[5]  alive key   hash: waiter -> "<deadline ms> <ttl ms> <token>", written anew by every
                       attempt of a queued waiter (which clears a release's pass-over mark " -":
                       see compat-release.lua)
  ARGV[1]  token       the caller's token: its manager's tag (8 hex digits) and 128 random bits
  ARGV[2]  ttl         lease time to live, milliseconds, positive integer
  ARGV[3]  retention   how long the fence counter outlives the lease, milliseconds
  ARGV[4]  waiter      "<inbox>:<id>" to queue under when the lock is busy, or "" not to queue
  ARGV[5]  entry ttl   how long a queue entry lives without another attempt, milliseconds
  ARGV[6]  unit        milliseconds per unit of the timestamp: "1" (ms) or "1000" (seconds)
  ARGV[7]  linger      how long the keys outlive the timestamp, milliseconds: legacy clients then
                       find an expired timestamp (and take over with GETSET, their usual path)
                       rather than a key that vanished between their SETNX and their GET

  Returns
    {1, fence}  acquired: the lock was free, or its timestamp was in the past (a crashed or late
                holder, legacy or latchkey: taken over), or it already holds ARGV[1] (a retried
                acquire: refreshed, the same fence returned). KEYS[1] = ceil((now + ttl) / unit),
                KEYS[1] and KEYS[2] expire linger ms after that timestamp passes. fence =
                max(last fence + 1, TIME in µs), as in acquire.lua. Legacy holders get no fence.
    {0, ms}     busy: the timestamp is still in the future; ms until it passes (the lock is free
                from ms + 1 on). The caller is queued when ARGV[4] is not empty (latchkey's
                releases wake it; legacy ones, a DEL, wake nobody).
    {0, ms, tag}  busy, held by a latchkey lease whose token has the tagged form (40 hex
                digits): tag is its first 8 digits, the holding manager's tag (see
                register-holder.lua); never the rest of the token. A legacy holder has none.
  Errors
    "ERR latchkey: ... not a timestamp"  KEYS[1] holds something else (the wrong key?).
                Nothing is written then.
    "ERR latchkey: ... a Unix time in seconds|milliseconds"  KEYS[1] holds a timestamp of the
                other unit: the compat mode does not match the legacy services. Nothing is written.
    WRONGTYPE   one of the keys holds a value of another type. Nothing is written then.
]]
local lockKey, ownerKey, fenceKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, ttl, waiter = ARGV[1], tonumber(ARGV[2]), ARGV[4]
local unit, linger = tonumber(ARGV[6]), tonumber(ARGV[7])

local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local last = redis.call('GET', fenceKey) -- before any write: a WRONGTYPE error leaves nothing written
local current = redis.call('GET', lockKey)
local mine = false

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
  mine = redis.call('GET', ownerKey) == token and redis.call('PTTL', lockKey) >= 0
  local heldUntil = (tonumber(current) + 1) * unit - 1
  if nowMs <= heldUntil and not mine then
    if waiter ~= '' then
      local entryTtl = tonumber(ARGV[5])
      redis.call('ZADD', queueKey, 'NX', tonumber(time[1]) * 1000000 + tonumber(time[2]), waiter)
      redis.call('HSET', aliveKey, waiter, (nowMs + entryTtl) .. ' ' .. ARGV[2] .. ' ' .. token)
      -- The keys outlive this entry (2 x its ttl), and are never shortened: another manager's entries
      -- (a longer entry ttl: a longer recheck) keep theirs. PTTL reads, where PEXPIRE writes (and replicates).
      if redis.call('PTTL', queueKey) < entryTtl then redis.call('PEXPIRE', queueKey, entryTtl * 2) end
      if redis.call('PTTL', aliveKey) < entryTtl then redis.call('PEXPIRE', aliveKey, entryTtl * 2) end
    end
    local busy = {0, heldUntil - nowMs}
    -- A latchkey lease (the lock key has an expiry: see above): its manager's tag.
    if redis.call('PTTL', lockKey) >= 0 then
      local owner = redis.call('GET', ownerKey)
      if owner and #owner == 40 then
        busy[3] = string.sub(owner, 1, 8)
      end
    end
    return busy
  end
end

-- Free, expired, or ours: write our timestamp (and our token beside it) in one step.
local value = math.floor((nowMs + ttl + unit - 1) / unit)
local px = (value + 1) * unit - nowMs + linger
redis.call('SET', lockKey, string.format('%.0f', value), 'PX', px)
redis.call('SET', ownerKey, token, 'PX', px)
if waiter ~= '' and redis.call('ZREM', queueKey, waiter) == 1 then
  redis.call('HDEL', aliveKey, waiter)
end

if mine and last then
  return {1, tonumber(last)}
end
local fence = tonumber(time[1]) * 1000000 + tonumber(time[2])
local previous = last and tonumber(last)
if previous and previous >= fence then
  fence = previous + 1
end
redis.call('SET', fenceKey, fence, 'PX', ttl + tonumber(ARGV[3]))
return {1, fence}
