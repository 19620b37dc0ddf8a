--[[
  acquire: take a lease on a lock if it is free, and issue a fencing token; otherwise join the
  lock's wait queue (so that a release can hand the lock straight to this waiter) and report the
  holder's remaining TTL.

  One atomic step, so a crash can never leave a lock without an expiry (the SETNX-then-EXPIRE
  trap) or a lease without a fence.

  KEYS[1]  lock key    string: the holder's token
  KEYS[2]  fence key   string: the last fence issued for this lock (an integer)
  KEYS[3]? queue key   sorted set: waiters in arrival order (member: waiter, score: arrival µs);
                       passed with KEYS[4], ARGV[4] and ARGV[5], only by a caller that queues
  KEYS[4]? alive key   hash: waiter -> "<deadline ms> <ttl ms> <token>", the entry's expiry
                       (server clock) and what a release needs to grant the lock to it
  ARGV[1]  token       the caller's token: its manager's tag (8 hex digits, not secret: see
                       Returns) and 128 random bits (32 hex digits)
  ARGV[2]  ttl         lease time to live, milliseconds, positive integer
  ARGV[3]? floor       absent or "" on a single Redis; on a Redlock node, the caller's guess of
                       the next fence, an integer: the highest fence it has seen a node issue for
                       this lock, plus 1 (0 when it has seen none). See Returns: it is a hint,
                       bounded by the server's clock, never a clock of the caller's
  ARGV[4]? waiter      "<inbox>:<id>" to queue under when the lock is busy; absent: not queued
  ARGV[5]? entry ttl   how long a queue entry lives without another attempt, milliseconds

  The queue's keys and arguments go together: a call passes all four or none (with ARGV[3], ""
  when there is no floor). The fence counter lives for the lease's ttl plus RETENTION (one day,
  below: FENCE_RETENTION in backend.ts, which a unit test keeps equal), a constant, so it is not
  sent with each call. Fewer arguments are less work for Redis and the client (each one is
  parsed, copied and turned into a Lua string), which counts five times over on a Redlock of five
  nodes: the common call, a free lock on a single Redis, sends two keys and two arguments.

  Returns
    fence       acquired: the fencing token, a positive integer (a bare integer, not an array:
                the common reply is the cheapest one). fence = max(last fence + 1, server TIME
                in microseconds): it grows strictly on this server, and stays above earlier
                fences when the counter was lost (restart without persistence, failover),
                unless the server clock went back past the last fence.
                With a floor (a Redlock node), fence = max(last fence + 1, floor), except that a
                floor above the server's TIME counts as none, and fence = TIME when there is no
                counter, whatever the floor. So a fence is never above max(last fence + 1, TIME):
                every fence is some server's clock reading plus at most one per acquire since,
                and a node that restarts empty issues its own TIME, which is above the fences
                issued before unless its clock is behind the one they came from (by more than
                the time since). No caller's clock, nor any floor, can push a counter past the
                servers' clocks.
                What the floor is for: the voters of a Redlock majority must issue one fence, or
                the caller needs a second round trip to raise the lower counters
                (raise-fence.lua). Counters that agree at `last` issue last + 1 for a floor at
                or below it, and the floor for one above it that no voter's clock trails: the
                same fence either way. The caller offers the highest fence it has seen plus 1
                (itself a server's clock plus acquires), so a lock taken again by its last
                holder has the floor as its fence: the counter is written once and no clock is
                read. TIME is read only when the floor would raise the fence past last + 1, or
                there is no counter. (The caller's clock as the floor needed no TIME here, but
                let a caller whose clock ran ahead push every counter past every server clock.)
                The caller's queue entry, if any, is removed.
                If the lock already holds ARGV[1] (a retried or replayed acquire, or a grant by
                a release whose message has not arrived yet), the lease is refreshed to ttl and
                the fence it was issued is returned again.
    {0, pttl}   busy: held by another token; pttl is its remaining time to live in
                milliseconds (-1 if the key has no expiry). The caller is queued (or its entry
                refreshed) when ARGV[4] is given.
    {0, pttl, tag}  busy, and held by a token of the tagged form (40 hex digits): tag is its
                first 8 digits, the holding manager's tag, under which that manager registered
                who it is (register-holder.lua). Only the tag: a token's random part is never
                returned.
  Errors
    WRONGTYPE   one of the keys holds a value of another type. Nothing is written then.
]]
local lockKey, fenceKey, queueKey, aliveKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
-- How long the fence counter outlives the lease, ms: FENCE_RETENTION in backend.ts (one day).
local RETENTION = 86400000
local token, ttl, waiter = ARGV[1], ARGV[2], ARGV[4]
local floor = tonumber(ARGV[3] or '')
local fenceTtl = tonumber(ttl) + RETENTION

-- The server clock in µs.
local function serverTime()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end

-- The common case first: the lock is free.
if redis.call('SET', lockKey, token, 'NX', 'PX', ttl) then
  -- One call writes the counter (the floor, or the clock) and reads its previous value (SET ...
  -- GET). Numbers are passed to Redis with %.17g: exact for integers below 2^53. The counter is
  -- written again in the rare cases where the value written was not the fence: the previous one
  -- was not below it (more than one fence in a µs, a clock that went back, a floor behind the
  -- counter), a floor above both last + 1 and the server clock, or a floor and no counter (the
  -- fence is then the server clock).
  local fence = floor or serverTime()
  local previous = redis.pcall('SET', fenceKey, fence, 'PX', fenceTtl, 'GET')
  if type(previous) == 'table' and previous.err then
    -- The counter is not a string (WRONGTYPE): the lock just written is taken back, so that
    -- nothing is left written, and the error returned.
    redis.call('DEL', lockKey)
    return previous
  end
  previous = previous and tonumber(previous)
  local again = false
  if previous and previous >= fence then
    fence, again = previous + 1, true
  elseif floor and previous ~= fence - 1 then
    -- The floor would be a jump past last + 1, or there is no counter: the server clock decides.
    local now = serverTime()
    if not previous then
      fence, again = now, now ~= fence
    elseif fence > now then
      fence, again = previous + 1, true
    end
  end
  if again then
    redis.call('SET', fenceKey, fence, 'PX', fenceTtl)
  end
  if waiter and redis.call('ZREM', queueKey, waiter) == 1 then
    redis.call('HDEL', aliveKey, waiter)
  end
  return fence
end

local current = redis.call('GET', lockKey) -- raises WRONGTYPE when the lock key is not a string
if current == token then
  redis.call('PEXPIRE', lockKey, ttl)
  local last = tonumber(redis.call('GET', fenceKey) or '')
  if last then
    return last
  end
  -- The counter expired or was evicted during a long hold: a new fence, the server clock.
  local fence = serverTime()
  redis.call('SET', fenceKey, fence, 'PX', fenceTtl)
  return fence
end

if waiter then
  local now = redis.call('TIME')
  local entryTtl = tonumber(ARGV[5])
  local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('ZADD', queueKey, 'NX', tonumber(now[1]) * 1000000 + tonumber(now[2]), waiter)
  redis.call('HSET', aliveKey, waiter, (nowMs + entryTtl) .. ' ' .. ttl .. ' ' .. token)
  -- The keys outlive this entry (2 x its ttl), and are never shortened: another manager's entries
  -- (a longer entry ttl: a longer recheck) keep theirs. PTTL reads, where PEXPIRE writes (and replicates).
  if redis.call('PTTL', queueKey) < entryTtl then redis.call('PEXPIRE', queueKey, entryTtl * 2) end
  if redis.call('PTTL', aliveKey) < entryTtl then redis.call('PEXPIRE', aliveKey, entryTtl * 2) end
end
local busy = {0, redis.call('PTTL', lockKey)}
if #current == 40 then
  busy[3] = string.sub(current, 1, 8)
end
return busy
