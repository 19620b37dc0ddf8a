--[[
  leave-queue: take a waiter that stops waiting out of a wait queue (a lock's or a semaphore's),
  on the queue key (and its alive hash, when given) alone, and if it was first, tell the next one
  to look again ("<waiter> 0"). A fallback of leave.lua and semaphore-leave.lua on Redis Cluster
  while the slot migrates: a node then refuses (TRYAGAIN) a script naming keys of the slot of
  which only some exist on it, and those name the lock key or holders set, which may not exist.
  It does not say whether the waiter holds the lock or permits (that needs the other key): the
  caller releases them in case it does (a release finds out).

  KEYS[1]  queue key   sorted set of waiters in arrival order ("<inbox>:<id>")
  KEYS[2]? alive key   hash: waiter -> its entry's deadline (and more); the waiter's field is
                       removed. Sent when the queue and the alive hash are on one node (they are
                       written together); left out if that is refused (the field then goes with
                       its key's expiry, and names a waiter that is no longer queued)
  ARGV[1]  waiter      "<inbox>:<id>"
  ARGV[2]  inbox prefix  a waiter "<inbox>:<id>" is told on channel ARGV[2] .. "<inbox>"
  ARGV[3]  sharded     "1": Redis Cluster: SPUBLISH, "0": PUBLISH

  Returns
    1  it was queued (and is not now)
    0  it was not queued
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
-- Read before the removal: a key this script emptied (and so deleted) may not be read again while
-- the slot migrates (the node answers as if it had moved).
local firstTwo = redis.call('ZRANGE', KEYS[1], 0, 1)
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if KEYS[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
local nextWaiter = firstTwo[1] == ARGV[1] and firstTwo[2] or nil
if nextWaiter then
  local publish = ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH'
  redis.call(publish, ARGV[2] .. string.match(nextWaiter, '^(.*):[^:]*$'), nextWaiter .. ' 0')
end
return removed
