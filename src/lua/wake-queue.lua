--[[
  wake-queue: tell the first waiters of a lock's wait queue to look again ("<waiter> 0" on each
  one's inbox channel), leaving every entry in place. Run after release-key.lua freed a lock while
  its slot migrates: on the queue key alone, so that it runs wherever that key is (it finds no
  queue on a node that does not hold it, and then tells nobody).

  KEYS[1]  queue key   sorted set of waiters in arrival order ("<inbox>:<id>")
  ARGV[1]  inbox prefix  a waiter "<inbox>:<id>" is told on channel ARGV[1] .. "<inbox>"
  ARGV[2]  sharded     "1": Redis Cluster: SPUBLISH (ARGV[1] is then "<lock key>:inbox:", a
                       channel in the lock's slot), "0": PUBLISH
  ARGV[3]  count       how many waiters to tell at most, from the head of the queue

  Returns
    how many of them a listener heard
  Errors
    WRONGTYPE  KEYS[1] holds a value that is not a sorted set.
]]
local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'
local heard = 0
for _, waiter in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)) do
  local inbox = ARGV[1] .. string.match(waiter, '^(.*):[^:]*$')
  if redis.call(publish, inbox, waiter .. ' 0') > 0 then
    heard = heard + 1
  end
end
return heard
