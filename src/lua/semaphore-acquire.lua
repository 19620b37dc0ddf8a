--[[
  semaphore-acquire: take `permits` of a counting semaphore's `limit` if they are free and no
  live waiter is queued ahead of the caller (first come, first served: a waiter that needs more
  permits than are free holds the others back), and issue a fencing token; otherwise join the
  semaphore's wait queue and report when the next permit expires.

  Each holder is a lease of its own: a member of the holders set scored by its expiry (server
  clock, ms), so the permits of a crashed process come back when its TTL runs out, without
  anybody releasing them. Expired holders are dropped by every call before counting. The permits
  in use are kept in the permits hash under "#used" (tokens are hex: no clash), so a count costs
  the same whatever the limit and however many permits one holder takes (a read-write lock's
  writer takes them all).

  KEYS[1]  holders key sorted set: token -> expiry (server ms)
  KEYS[2]  permits key hash: token -> "<permits> <fence>", and "#used" -> permits in use
  KEYS[3]  fence key   string: the last fence issued for this semaphore
  KEYS[4]  queue key   sorted set: waiters in arrival order (member: waiter, score: arrival µs)
  KEYS[5]  alive key   hash: waiter -> "<deadline ms>", when its entry is dead without another
                       attempt[" -": a release passed it over once]
  ARGV[1]  token       the caller's random token
  ARGV[2]  ttl         lease time to live, milliseconds
  ARGV[3]  retention   how long the fence counter outlives the lease, milliseconds
  ARGV[4]  limit       how many permits the semaphore has (the same for every caller: the
                       caller that disagrees is not detected)
  ARGV[5]  permits     how many this caller takes, 1 to limit
  ARGV[6]  waiter      "<inbox>:<id>" to queue under when it must wait, or "" not to queue
  ARGV[7]  entry ttl   how long a queue entry lives without another attempt, milliseconds
  ARGV[8]  inbox prefix  the next waiter "<inbox>:<id>" is woken on ARGV[8] .. "<inbox>"
  ARGV[9]  sharded     "1": Redis Cluster (SPUBLISH), "0": PUBLISH

  Returns
    {1, fence}  acquired; fence = max(last fence + 1, server TIME in µs). When permits are left
                over and waiters are queued, the first live one a listener hears is woken
                ("<waiter> 0") to try (one nobody hears is marked passed over).
                If the caller already holds permits under ARGV[1] (a replayed acquire), its
                lease is refreshed and its fence returned again.
    {0, ms}     must wait: ms until the earliest holder expires (0 if the queue, not the
                holders, is what holds it back). Queued (or its entry refreshed) when ARGV[6]
                is not empty.
  Errors
    WRONGTYPE   one of the keys holds a value of another type.
]]
local holders, permitsKey, fenceKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, ttl, limit, want, waiter = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local publish = ARGV[9] == '1' and 'SPUBLISH' or 'PUBLISH'
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)

-- Permits of holders whose lease ran out come back.
local expired = redis.call('ZRANGEBYSCORE', holders, '-inf', nowMs)
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', nowMs)
  for _, gone in ipairs(expired) do
    local entry = redis.call('HGET', permitsKey, gone)
    if entry then
      redis.call('HDEL', permitsKey, gone)
      redis.call('HINCRBY', permitsKey, '#used', -tonumber(string.match(entry, '^(%d+)')))
    end
  end
end

-- Both keys live at least as long as the longest lease (they share their expiry).
local function keepFor(expiry)
  if redis.call('PTTL', holders) < expiry - nowMs then
    redis.call('PEXPIRE', holders, expiry - nowMs)
    redis.call('PEXPIRE', permitsKey, expiry - nowMs)
  end
end

local mine = redis.call('HGET', permitsKey, token)
if mine then
  redis.call('ZADD', holders, nowMs + ttl, token)
  keepFor(nowMs + ttl)
  return {1, tonumber(string.match(mine, ' (%d+)$'))}
end

-- The first live waiter in the queue, dropping dead entries on the way. An entry a release passed
-- over (marked " -": nobody listened on its inbox) is skipped, not dropped, unless it is the
-- caller's own: it keeps its place, and its next attempt writes it anew.
local function firstLive()
  local skip = 0
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', queueKey, skip, skip)[1]
    if not head then return nil end
    local entry = redis.call('HGET', aliveKey, head) or '0'
    if tonumber(string.match(entry, '^%d+')) > nowMs then
      if head == waiter or string.sub(entry, -2) ~= ' -' then return head end
      skip = skip + 1
    else
      redis.call('ZREM', queueKey, head)
      redis.call('HDEL', aliveKey, head)
    end
  end
  return nil
end

local used = tonumber(redis.call('HGET', permitsKey, '#used') or '0')
local head = firstLive()
if (head == nil or head == waiter) and used + want <= limit then
  local last = redis.call('GET', fenceKey)
  local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local previous = last and tonumber(last)
  if previous and previous >= fence then
    fence = previous + 1
  end
  redis.call('SET', fenceKey, fence, 'PX', ttl + tonumber(ARGV[3]))
  redis.call('ZADD', holders, nowMs + ttl, token)
  redis.call('HSET', permitsKey, token, want .. ' ' .. string.format('%.0f', fence))
  redis.call('HINCRBY', permitsKey, '#used', want)
  keepFor(nowMs + ttl)
  if waiter ~= '' and redis.call('ZREM', queueKey, waiter) == 1 then
    redis.call('HDEL', aliveKey, waiter)
  end
  -- Permits left over: the next waiter may fit; it finds out by trying. The first live one a
  -- listener hears is told, in one pass over the queue as semaphore-release.lua makes it: an
  -- expired entry is dropped, a marked one skipped (as firstLive does; a release drops it if it is
  -- still unheard), and one nobody hears (its process died, or is between two subscriptions) is
  -- marked " -" and passed over.
  if used + want < limit then
    local skip = 0
    for _ = 1, 100 do
      local head = redis.call('ZRANGE', queueKey, skip, skip)[1]
      if not head then break end
      local entry = redis.call('HGET', aliveKey, head) or '0'
      if tonumber(string.match(entry, '^%d+')) <= nowMs then
        redis.call('ZREM', queueKey, head)
        redis.call('HDEL', aliveKey, head)
      else
        if string.sub(entry, -2) ~= ' -' then
          if redis.call(publish, ARGV[8] .. string.match(head, '^(.*):[^:]*$'), head .. ' 0') > 0 then break end
          redis.call('HSET', aliveKey, head, entry .. ' -')
        end
        skip = skip + 1
      end
    end
  end
  return {1, fence}
end

if waiter ~= '' then
  local entryTtl = tonumber(ARGV[7])
  redis.call('ZADD', queueKey, 'NX', tonumber(now[1]) * 1000000 + tonumber(now[2]), waiter)
  redis.call('HSET', aliveKey, waiter, nowMs + entryTtl)
  -- The keys outlive this entry (2 x its ttl), and are never shortened: another manager's entries
  -- (a longer entry ttl: a longer recheck) keep theirs. PTTL reads, where PEXPIRE writes (and replicates).
  if redis.call('PTTL', queueKey) < entryTtl then redis.call('PEXPIRE', queueKey, entryTtl * 2) end
  if redis.call('PTTL', aliveKey) < entryTtl then redis.call('PEXPIRE', aliveKey, entryTtl * 2) end
end
if used + want > limit then
  local earliest = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')[2]
  if earliest then
    return {0, math.max(1, tonumber(earliest) - nowMs)}
  end
end
return {0, 0}
