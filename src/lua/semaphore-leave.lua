--[[
  semaphore-leave: take a waiter that stops waiting out of the semaphore's queue; if it was the
  first, wake the next live one (it may fit now), passing over a waiter nobody hears and dropping
  an expired one as semaphore-release.lua does (a dead process's entry does not swallow the
  wake-up); and say whether it holds permits anyway (an acquire whose reply was lost: the caller
  then releases them).

  KEYS[1]  holders key sorted set: token -> expiry (server ms)
  KEYS[2]  queue key   sorted set of waiters
  KEYS[3]  alive key   hash: waiter -> "<deadline ms>"[" -": a release passed it over once]
  ARGV[1]  waiter      "<inbox>:<id>"
  ARGV[2]  token       the waiter's token
  ARGV[3]  inbox prefix  a waiter "<inbox>:<id>" is told on ARGV[3] .. "<inbox>"
  ARGV[4]  sharded     "1": Redis Cluster (SPUBLISH), "0": PUBLISH

  Returns
    1  the waiter holds permits under its token
    0  otherwise
]]
local publish = ARGV[4] == '1' and 'SPUBLISH' or 'PUBLISH'
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
-- The first waiter that holds the others back: entries a release passed over (marked " -") and
-- expired ones (semaphore-acquire.lua drops them) do not.
local function first()
  for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, 9)) do
    local entry = redis.call('HGET', KEYS[3], member) or '0'
    if tonumber(string.match(entry, '^%d+')) > nowMs and string.sub(entry, -2) ~= ' -' then return member end
  end
  return nil
end
local wasFirst = first() == ARGV[1]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if wasFirst then
  -- The next live waiter a listener hears, as semaphore-release.lua finds it: an expired entry is
  -- dropped; one nobody hears is passed over (marked " -") the first time, dropped the second.
  local skip = 0
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', KEYS[2], skip, skip)[1]
    if not head then break end
    local entry = redis.call('HGET', KEYS[3], head) or '0'
    local live = tonumber(string.match(entry, '^%d+')) > nowMs
    if live and redis.call(publish, ARGV[3] .. string.match(head, '^(.*):[^:]*$'), head .. ' 0') > 0 then
      break
    end
    if live and string.sub(entry, -2) ~= ' -' then
      redis.call('HSET', KEYS[3], head, entry .. ' -')
      skip = skip + 1
    else
      redis.call('ZREM', KEYS[2], head)
      redis.call('HDEL', KEYS[3], head)
    end
  end
end
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return 1
end
return 0
