--[[
  multi-acquire: take leases on several locks at once, all or none, and issue a fencing token
  for each. Nothing is written when any of the locks is busy: the caller then takes them one by
  one in the global order (see locks.acquireAll). No wait queue is joined.

  One atomic step: no other client ever sees some of these locks held by this token and the
  others not. Needs every key in one Redis (on Redis Cluster, in one slot).

  KEYS[2i-1]  lock key of lock i    string: the holder's token
  KEYS[2i]    fence key of lock i   string: the last fence issued for lock i (an integer)
              (i = 1 .. n: two keys per lock, n >= 1, locks in the caller's global order)
  ARGV[1]  token       the caller's random token (at least 128 bits, hex), the same for every lock
  ARGV[2]  ttl         lease time to live, milliseconds, positive integer
  ARGV[3]  retention   how long each fence counter outlives the lease, milliseconds

  Returns
    {1, fence_1, ..., fence_n}  acquired every lock. fence_i = max(last fence of lock i + 1,
                server TIME in microseconds), as acquire.lua issues them.
    {0, i, pttl}  lock i (1-based) is busy (held by any token), and nothing was written; pttl is
                its remaining time to live in milliseconds (-1 if the key has no expiry). Locks
                after i were not looked at.
  Errors
    WRONGTYPE   one of the keys holds a value of another type. Nothing is written then.
]]
local token, ttl, retention = ARGV[1], ARGV[2], tonumber(ARGV[3])
local n = #KEYS / 2

-- First look at every lock (and read every counter, so that a WRONGTYPE error leaves nothing written).
local last = {}
for i = 1, n do
  last[i] = redis.call('GET', KEYS[2 * i]) or false
  if redis.call('GET', KEYS[2 * i - 1]) then -- raises WRONGTYPE when the lock key is not a string
    return {0, i, redis.call('PTTL', KEYS[2 * i - 1])}
  end
end

local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local reply = {1}
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], token, 'PX', ttl)
  local fence = clock
  local previous = last[i] and tonumber(last[i])
  if previous and previous >= fence then
    fence = previous + 1
  end
  -- Numbers are passed to Redis with %.17g: exact for integers below 2^53.
  redis.call('SET', KEYS[2 * i], fence, 'PX', tonumber(ttl) + retention)
  reply[i + 1] = fence
end
return reply
