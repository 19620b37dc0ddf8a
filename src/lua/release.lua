--[[
  release: end a lease, only if the lock still holds the caller's token, and pass the lock on.

  GET, compare and write in one atomic step: a holder whose lease expired and was taken by
  someone else never touches the new holder's lock. Then, in order of preference:
   - hand-off: ARGV[4] is a new token (a waiter in the releasing process) and ARGV[6] is not "1":
     the lock moves to that token with a new fence, in this same round trip;
   - grant: the wait queue holds a live waiter whose manager is listening: the lock moves to
     that waiter's token (from its queue entry) with a new fence, and its manager's inbox is
     told "<waiter> <fence>". The waiter needs no round trip of its own, nobody else wakes,
     and the releasing process cannot barge back in. A waiter whose inbox has no subscriber
     (PUBLISH reports how many received the message) is passed over: the first time its entry
     stays in place, marked (its process may be between two subscriptions); the second, or
     once its deadline passed, it is dropped (its process died);
   - free: the key is deleted.
  Where one server cannot decide who holds the lock next (Redlock's nodes, replica
  acknowledgement), wake-release.lua frees the lock and wakes the next waiter instead.

  KEYS[1]  lock key
  KEYS[2]  fence key
  KEYS[3]  queue key   sorted set of waiters in arrival order
  KEYS[4]  alive key   hash waiter -> "<deadline ms> <ttl ms> <token>"[" -": passed over once]
  ARGV[1]  token       token of the lease being released
  ARGV[2]  inbox prefix  a waiter "<inbox>:<id>" is told on channel ARGV[2] .. "<inbox>"
  ARGV[3]? sharded     "1": Redis Cluster: tell waiters with SPUBLISH (ARGV[2] is then
                       "<lock key>:inbox:", a channel in the lock's slot); absent or "0": PUBLISH
  ARGV[4]? new token   hand-off: the next local waiter's token; absent or "": no hand-off
  ARGV[5]? ttl         hand-off: time to live of the new lease, milliseconds
  ARGV[6]? pass on     "1": grant to a live queued waiter, if any, rather than hand off

  The optional arguments are trailing: the common call (a free release on a single Redis) sends
  the token and the inbox prefix alone. A granted lock's fence counter lives for its ttl plus
  RETENTION (one day, below: FENCE_RETENTION in backend.ts, which a unit test keeps equal).

  Returns (a bare integer, except for a hand-off: the common replies are the cheapest ones)
    1            released (granted to a queued waiter of another manager, or freed)
    {2, fence}   handed off to ARGV[4] with this fence
    0            not held: the key is gone (the lease expired or was deleted)
    -1           not held: the key holds another token (the lease expired and was taken)
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local lockKey, fenceKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local newToken = ARGV[4] or ''
-- How many listeners got the message: SPUBLISH counts those on this shard, where the inbox is.
local publish = ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH'
-- How long a fence counter outlives the lease, ms: FENCE_RETENTION in backend.ts (one day).
local RETENTION = 86400000

local current = redis.call('GET', lockKey)
if current ~= ARGV[1] then
  if not current then return 0 end
  return -1
end

local now

-- Gives the lock to `token` for `ttl` ms with the next fence. The counter is written and its
-- previous value read in one call (SET ... GET), before the lock: a counter of another type fails
-- with WRONGTYPE before the lock changes hands. In the rare case that the previous value was not
-- below the clock, the counter is written again above it.
local function grant(token, ttl)
  now = now or redis.call('TIME')
  local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local fenceTtl = tonumber(ttl) + RETENTION
  local previous = redis.call('SET', fenceKey, fence, 'PX', fenceTtl, 'GET')
  previous = previous and tonumber(previous)
  if previous and previous >= fence then
    fence = previous + 1
    redis.call('SET', fenceKey, fence, 'PX', fenceTtl)
  end
  redis.call('SET', lockKey, token, 'PX', ttl)
  return fence
end

if newToken == '' or ARGV[6] == '1' then
  -- Entries passed over (see below) stay in the queue, ahead of the one looked at next. The
  -- common case reads the head and its state at once: two commands, no count first. But a key
  -- this script deleted is not named again: while the lock's slot migrates (Redis Cluster), a
  -- script on the source node may not name a key that is missing there, one it deleted itself
  -- included (every key it names existed when it started, or the node refused the call). So the
  -- queue and the alive hash are counted before an entry is dropped (the rare path), and neither
  -- is read again once emptied.
  local skip = 0
  local queueLeft, aliveLeft = true, true
  for _ = 1, 100 do
    if not queueLeft then break end
    local head = redis.call('ZRANGE', queueKey, skip, skip)[1]
    if not head then break end
    local entry = aliveLeft and redis.call('HGET', aliveKey, head) or nil
    now = now or redis.call('TIME')
    local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    local deadline, ttl, token, passed = string.match(entry or '', '^(%d+) (%d+) (%x+)(.*)$')
    local keep = false
    if deadline and tonumber(deadline) > nowMs then
      local fence = grant(token, ttl)
      local inbox = ARGV[2] .. string.match(head, '^(.*):[^:]*$')
      -- '%.0f': Lua's own number-to-string (head .. fence) keeps 14 significant digits, and a
      -- fence has 16 (microseconds): the waiter would read a rounded fence, possibly below the
      -- previous holder's. (Numbers passed to redis.call as arguments are written in full.)
      if redis.call(publish, inbox, head .. ' ' .. string.format('%.0f', fence)) > 0 then
        redis.call('ZREM', queueKey, head)
        if aliveLeft then redis.call('HDEL', aliveKey, head) end
        return 1
      end
      -- Nobody listens on its inbox: its process is gone, or it is between two subscriptions
      -- (a failover or a reshard moved its channel). Passed over once: its entry keeps its place,
      -- marked " -" (its next attempt writes it anew); found unheard again, it is dropped.
      if passed == '' then
        redis.call('HSET', aliveKey, head, entry .. ' -')
        keep = true
      end
    end
    if keep then
      skip = skip + 1
    else
      queueLeft = redis.call('ZCARD', queueKey) > 1
      redis.call('ZREM', queueKey, head)
      if aliveLeft then
        local alive = redis.call('HLEN', aliveKey)
        aliveLeft = alive - redis.call('HDEL', aliveKey, head) > 0
      end
    end
  end
  if newToken == '' then
    redis.call('DEL', lockKey)
    return 1
  end
end

return {2, grant(newToken, ARGV[5])}
