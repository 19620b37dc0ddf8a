--[[
  compat-release: end a compat lease, only if the lock still holds it, and wake the next latchkey
  waiter. A lease whose key a legacy client overwrote (GETSET, even a losing one) or deleted and
  set again (SETNX) is not ours any more: the key is left alone, whatever its timestamp says.
  This is the legacy release rule ("DEL only if not expired") done right: ownership, not the
  clock, decides, and the check and the DEL are one atomic step.

  A token "legacy:<value>" (from compat-inspect.lua, for Locks.forceRelease only) ends a legacy
  holder's lease: the key is deleted only if it still holds exactly that value, with no expiry.

  Legacy clients never queue and never listen: the oldest live latchkey waiter is told
  "<waiter> 0" (woken, not granted: it tries again, as with wake-release.lua), and the lock is
  freed, so that legacy clients can take it too. Dead and unheard waiters are treated as in
  wake-release.lua: a waiter whose entry expired is dropped and the next one told; one whose
  inbox has no subscriber (PUBLISH reports how many received the message) is passed over: the
  first time its entry stays in place, marked " -" (its process may be between two
  subscriptions; its next attempt, compat-acquire.lua, writes the entry anew), the second time it
  is dropped (its process is gone). The mark lives in latchkey's alive hash only, which legacy
  clients never read.

  KEYS[1]  lock key    string: the legacy lock key, an expiry timestamp
  KEYS[2]  owner key   string: the token of the latchkey lease that wrote KEYS[1]
  KEYS[3]  queue key   sorted set of latchkey waiters in arrival order
  KEYS[4]  alive key   hash waiter -> "<deadline ms> <ttl ms> <token>"[" -": passed over once]
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
  redis.call('DEL', lockKey, ownerKey)
elseif pttl == -1 and token == 'legacy:' .. current then
  redis.call('DEL', lockKey)
else
  return -1
end

local nowMs
local skip = 0
for _ = 1, 100 do
  local head = redis.call('ZRANGE', queueKey, skip, skip)[1]
  if not head then break end
  local entry = redis.call('HGET', aliveKey, head)
  if not nowMs then
    local now = redis.call('TIME')
    nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  end
  local deadline = string.match(entry or '', '^(%d+) ')
  local live = deadline and tonumber(deadline) > nowMs
  local inbox = ARGV[2] .. string.match(head, '^(.*):[^:]*$')
  if live and redis.call('PUBLISH', inbox, head .. ' 0') > 0 then
    break
  end
  if live and string.sub(entry, -2) ~= ' -' then
    -- Nobody listens on its inbox, for the first time: passed over, its entry kept in place and
    -- marked (its process may be between two subscriptions; its next attempt writes it anew).
    redis.call('HSET', aliveKey, head, entry .. ' -')
    skip = skip + 1
  else
    -- Expired, or unheard twice (its process is gone): drop it.
    redis.call('ZREM', queueKey, head)
    redis.call('HDEL', aliveKey, head)
  end
end
return 1
