--[[
  leave: take a waiter that stops waiting (timeout, abort, close) out of the wait queue. If the
  lock was reserved for it, the reservation is dropped so the lock is free at once.

  KEYS[1]  lock key
  KEYS[2]  queue key   sorted set of waiters
  KEYS[3]  alive key   hash waiter -> deadline
  ARGV[1]  waiter      "<inbox>:<id>"

  Returns
    1  the lock was reserved for this waiter and is now free
    0  otherwise
]]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('GET', KEYS[1]) == '~' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
