--[[
  compat-release: end a compat lease, only if the lock still holds it, and wake the next latchkey
  waiter. A lease whose key a legacy client overwrote (GETSET, even a losing one) or deleted and
  set again (SETNX) is not ours any more: the key is left alone, whatever its timestamp says.
  This is the legacy release rule ("DEL only if not expired") done right: ownership, not the
  clock, decides, and the check and the DEL are one atomic step.

  A token "legacy:<value>" (from compat-inspect.lua, for Locks.forceRelease only) ends a legacy
  holder's lease: the key is deleted only if it still holds exactly that value, with no expiry.

  Legacy clients never queue and never listen: the oldest live latchkey waiter is told
  "<waiter> 0" (woken, not granted: it tries again, as in release.lua's wake mode), and the lock
  is freed, so that legacy clients can take it too.

  KEYS[1]  lock key    string: the legacy lock key, an expiry timestamp
  KEYS[2]  owner key   string: the token of the latchkey lease that wrote KEYS[1]
  KEYS[3]  queue key   sorted set of latchkey waiters in arrival order
  KEYS[4]  alive key   hash waiter -> "<deadline ms> <ttl ms> <token>"
  KEYS[5]  holder key  hash describing the holder: deleted with the lease
  ARGV[1]  token       token of the lease being released, or "legacy:<value>"
  ARGV[2]  inbox prefix  a waiter "<inbox>:<id>" is told on channel ARGV[2] .. "<inbox>"

  Returns
     1  released (and the next live waiter, if any, woken)
     0  not held: the key is gone (the lease expired long ago, or was deleted)
    -1  not held: the key was written by someone else since
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local lockKey, ownerKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token = ARGV[1]
local current = redis.call('GET', lockKey)
if not current then
  return 0
end
local pttl = redis.call('PTTL', lockKey)
if pttl >= 0 and redis.call('GET', ownerKey) == token then
  redis.call('DEL', lockKey, ownerKey, KEYS[5])
elseif pttl == -1 and token == 'legacy:' .. current then
  redis.call('DEL', lockKey)
else
  return -1
end

local now
for _ = 1, 100 do
  local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
  if not head then break end
  local entry = redis.call('HGET', aliveKey, head)
  now = now or redis.call('TIME')
  local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local deadline = string.match(entry or '', '^(%d+) ')
  local inbox = ARGV[2] .. string.match(head, '^(.*):[^:]*$')
  if deadline and tonumber(deadline) > nowMs and redis.call('PUBLISH', inbox, head .. ' 0') > 0 then
    break
  end
  -- Expired, or nobody listens on its inbox (its process is gone): drop it.
  redis.call('ZREM', queueKey, head)
  redis.call('HDEL', aliveKey, head)
end
return 1
