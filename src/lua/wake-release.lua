--[[
  wake-release: end a lease, only if the lock still holds the caller's token; free the lock and
  tell the oldest live queued waiter to try again.

  Used where one server cannot decide who holds the lock next, so that a release must not grant
  it (as release.lua does): on each node of a Redlock (a lock needs a majority of nodes, and
  this node is one vote), and with replica acknowledgement (every lease must go through an
  acquire and its WAIT). The waiter is told "<waiter> 0" on its manager's inbox channel: it keeps
  its place in the queue and tries again at once. A waiter whose entry expired is dropped and
  the next one told. A waiter whose inbox has no subscriber (PUBLISH reports how many received
  the message) is passed over: the first time its entry stays in place, marked " -" (its process
  may be between two subscriptions), the second time it is dropped (its process is gone).

  This is every Redlock release's path, so it does as little as it can: three calls when nobody
  waits, and no more arguments than it needs.

  KEYS[1]  lock key
  KEYS[2]  queue key   sorted set of waiters in arrival order
  KEYS[3]  alive key   hash waiter -> "<deadline ms> <ttl ms> <token>"[" -": passed over once]
  ARGV[1]  token       token of the lease being released
  ARGV[2]  inbox prefix  a waiter "<inbox>:<id>" is told on channel ARGV[2] .. "<inbox>"
  ARGV[3]? sharded     "1": Redis Cluster: tell waiters with SPUBLISH (ARGV[2] is then
                       "<lock key>:inbox:", a channel in the lock's slot); absent: PUBLISH

  Returns
     1  released (and the next live waiter, if any, told)
     0  not held: the key is gone (the lease expired or was deleted)
    -1  not held: the key holds another token (the lease expired and was taken)
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  if not current then return 0 end
  return -1
end

local queueKey, aliveKey = KEYS[2], KEYS[3]
-- How many listeners got the message: SPUBLISH counts those on this shard, where the inbox is.
local publish = ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH'
local nowMs
local skip = 0
-- Counted so that neither the queue nor the alive hash is read again once emptied (deleted): while
-- the lock's slot migrates (Redis Cluster), a script on the source node may not name a key that
-- is missing there, one it deleted itself included.
local queued = redis.call('ZCARD', queueKey)
local alive = queued > 0 and redis.call('HLEN', aliveKey) or 0
for _ = 1, 100 do
  if skip >= queued then break end
  local head = redis.call('ZRANGE', queueKey, skip, skip)[1]
  if not head then break end
  local entry = alive > 0 and redis.call('HGET', aliveKey, head) or nil
  if not nowMs then
    local now = redis.call('TIME')
    nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  end
  local deadline = string.match(entry or '', '^(%d+) ')
  local live = deadline and tonumber(deadline) > nowMs
  local inbox = ARGV[2] .. string.match(head, '^(.*):[^:]*$')
  if live and redis.call(publish, inbox, head .. ' 0') > 0 then
    break
  end
  if live and string.sub(entry, -2) ~= ' -' then
    -- Nobody listens on its inbox, for the first time: passed over, its entry kept in place and
    -- marked (its process may be between two subscriptions; its next attempt writes it anew).
    redis.call('HSET', aliveKey, head, entry .. ' -')
    skip = skip + 1
  else
    -- Expired, or unheard twice (its process is gone): drop it.
    queued = queued - redis.call('ZREM', queueKey, head)
    if alive > 0 then alive = alive - redis.call('HDEL', aliveKey, head) end
  end
end
redis.call('DEL', KEYS[1])
return 1
