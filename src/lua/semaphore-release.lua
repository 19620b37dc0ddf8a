--[[
  semaphore-release: give back a holder's permits, only if its lease is still there, and wake
  the first live queued waiter ("<waiter> 0": it tries again at once and keeps its place). A
  waiter whose inbox has no subscriber is passed over: the first time its entry stays in place,
  marked " -" (its process may be between two subscriptions: semaphore-acquire lets the waiters
  behind it go first until its next attempt), the second time it is dropped (its process died).

  KEYS[1]  holders key sorted set: token -> expiry (server ms)
  KEYS[2]  permits key hash: token -> "<permits> <fence>", and "#used" -> permits in use
  KEYS[3]  queue key   sorted set of waiters
  KEYS[4]  alive key   hash: waiter -> "<deadline ms>"[" -": passed over once]
  ARGV[1]  token       the lease's token
  ARGV[2]  inbox prefix  a waiter "<inbox>:<id>" is told on ARGV[2] .. "<inbox>"
  ARGV[3]  sharded     "1": Redis Cluster (SPUBLISH), "0": PUBLISH

  Returns
    1  released
    0  not held: the lease expired (its permits came back already) or was never there
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local holders, permitsKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local publish = ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH'
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local mine = redis.call('HGET', permitsKey, ARGV[1])
if not mine then
  return 0
end
redis.call('HDEL', permitsKey, ARGV[1])
redis.call('HINCRBY', permitsKey, '#used', -tonumber(string.match(mine, '^(%d+)')))
local expiry = redis.call('ZSCORE', holders, ARGV[1])
redis.call('ZREM', holders, ARGV[1])
if not expiry or tonumber(expiry) <= nowMs then
  return 0
end
local skip = 0
for _ = 1, 100 do
  local head = redis.call('ZRANGE', queueKey, skip, skip)[1]
  if not head then break end
  local entry = redis.call('HGET', aliveKey, head) or '0'
  local live = tonumber(string.match(entry, '^%d+')) > nowMs
  if live and redis.call(publish, ARGV[2] .. string.match(head, '^(.*):[^:]*$'), head .. ' 0') > 0 then
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
