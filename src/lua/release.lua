--[[
  release: end a lease, only if the lock still holds the caller's token, and pass the lock on.

  GET, compare and write in one atomic step: a holder whose lease expired and was taken by
  someone else never touches the new holder's lock. Then, in order of preference:
   - hand-off: ARGV[4] is a new token (a waiter in the releasing process) and ARGV[5] is "0":
     the lock moves to the new token with a new fence, in this same round trip;
   - reservation: the wait queue holds a live waiter: the lock is reserved for it for
     ARGV[7] ms ("~" .. waiter) and its inbox is told, so it alone tries next (no herd, no
     barging by the releasing process);
   - free: the key is deleted.

  KEYS[1]  lock key
  KEYS[2]  fence key
  KEYS[3]  queue key   sorted set of waiters in arrival order
  KEYS[4]  alive key   hash waiter -> deadline (server ms)
  ARGV[1]  token       token of the lease being released
  ARGV[2]  inbox prefix  a waiter "<inbox>:<id>" is told on channel ARGV[2] .. "<inbox>"
  ARGV[3]  ttl         hand-off: time to live of the new lease, milliseconds
  ARGV[4]  new token   hand-off: the next local waiter's token, or "" for no hand-off
  ARGV[5]  pass on     "1": if a live waiter is queued, reserve for it rather than hand off
  ARGV[6]  retention   hand-off: how long the fence counter outlives the lease, milliseconds
  ARGV[7]  reserve ttl how long a reservation waits for its waiter, milliseconds

  Returns
    { 1, 0}      released (reserved for the next queued waiter, or freed)
    { 2, fence}  handed off to ARGV[4] with this fence
    { 0, 0}      not held: the key is gone (the lease expired or was deleted)
    {-1, 0}      not held: the key holds another token (the lease expired and was taken)
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local lockKey, fenceKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local newToken = ARGV[4]

local current = redis.call('GET', lockKey)
if current ~= ARGV[1] then
  if not current then return {0, 0} end
  return {-1, 0}
end

local now

local function nextLiveWaiter()
  local nowMs
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
    if not head then return nil end
    if not nowMs then
      now = redis.call('TIME')
      nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    end
    local deadline = redis.call('HGET', aliveKey, head)
    redis.call('ZREM', queueKey, head)
    redis.call('HDEL', aliveKey, head)
    if deadline and tonumber(deadline) > nowMs then return head end
  end
  return nil
end

if newToken == '' or ARGV[5] == '1' then
  local waiter = nextLiveWaiter()
  if waiter then
    redis.call('SET', lockKey, '~' .. waiter, 'PX', ARGV[7])
    redis.call('PUBLISH', ARGV[2] .. string.match(waiter, '^(.*):[^:]*$'), waiter)
    return {1, 0}
  end
  if newToken == '' then
    redis.call('DEL', lockKey)
    return {1, 0}
  end
end

now = now or redis.call('TIME')
local last = redis.call('GET', fenceKey)
local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
local previous = last and tonumber(last)
if previous and previous >= fence then
  fence = previous + 1
end
redis.call('SET', lockKey, newToken, 'PX', ARGV[3])
redis.call('SET', fenceKey, fence, 'PX', tonumber(ARGV[3]) + tonumber(ARGV[6]))
return {2, fence}
