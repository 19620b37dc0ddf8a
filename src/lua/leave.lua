--[[
  leave: take a waiter that stops waiting (timeout, abort, close) out of the wait queue, and
  say whether a release granted it the lock meanwhile (the caller then releases it, which
  passes it on).

  KEYS[1]  lock key
  KEYS[2]  queue key   sorted set of waiters
  KEYS[3]  alive key   hash waiter -> "<deadline ms> <ttl ms> <token>"
  ARGV[1]  waiter      "<inbox>:<id>"
  ARGV[2]  token       the waiter's token

  Returns
    1  the lock holds the waiter's token: it was granted to it
    0  otherwise
]]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[2] then
  return 1
end
return 0
