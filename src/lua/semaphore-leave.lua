--[[
  semaphore-leave: take a waiter that stops waiting out of the semaphore's queue; if it was the
  first, wake the next live one (it may fit now); and say whether it holds permits anyway (an
  acquire whose reply was lost: the caller then releases them).

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
-- The first waiter that holds the others back: entries a release passed over (marked " -") do not.
local function first()
  for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, 9)) do
    if string.sub(redis.call('HGET', KEYS[3], member) or '', -2) ~= ' -' then return member end
  end
  return nil
end
local wasFirst = first() == ARGV[1]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if wasFirst then
  local nextWaiter = first()
  if nextWaiter then
    redis.call(publish, ARGV[3] .. string.match(nextWaiter, '^(.*):[^:]*$'), nextWaiter .. ' 0')
  end
end
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return 1
end
return 0
