--[[
  keep-queued: for a batch of waiters of one manager, queued for locks and asleep, keep each one's
  place in its lock's wait queue and report what its lock is doing, in one call. The manager's
  queue keeper (src/wait/queue-keeper.ts) sends it every `recheck` ms instead of one acquire.lua
  per waiter: a waiter it reports held by another token sleeps on, without an attempt of its own.

  Per waiter:
   - its entry is not in the queue, or not in the alive hash, or its deadline passed (a release
     dropped it, or will), or it carries the " -" mark of a release that passed it over for want
     of a listener: nothing is written, and it must look for itself. So must a waiter a release
     granted the lock to (the grant took its entry out; its inbox message is in flight, or was
     lost): its attempt finds the lock holding its token and returns the lease. Its own attempt
     writes the entry anew (as acquire.lua's busy path: a passed-over waiter's next attempt clears
     the mark, which tells the next release that its process lives), and keeps its place when it
     is still in the queue. With ARGV[3] (one Redis), it is told so in its inbox: a wake-up
     "<waiter> 0" is published on its inbox's channel, after the message of any grant that took its
     entry out (this server published that one first, and one connection's messages arrive in
     order), so a granted waiter takes its lock from the grant, with no attempt, whichever of this
     reply and that message its process reads first. Reported -4 when the wake-up reached a
     listener, -3 when it did not or ARGV[3] is absent (the caller wakes it);
   - otherwise its entry's deadline is moved to now + entry ttl, the rest of the entry ("<ttl>
     <token>", what a release needs to grant it the lock) kept as it is, and the queue and alive
     keys made to outlive it (never shortened), as acquire.lua's busy path does; reported: the lock's PTTL
     (> 0: held; -1: held with no expiry; -2: free).
  The keeper never creates an entry: a waiter that left (leave.lua) is not queued again.

  KEYS[3i-2]  lock key of waiter i    string: the holder's token
  KEYS[3i-1]  queue key of waiter i   sorted set: waiters in arrival order
  KEYS[3i]    alive key of waiter i   hash: waiter -> "<deadline ms> <ttl ms> <token>"[" -"]
              (i = 1 .. n, n >= 1; on Redis Cluster every key of a batch in one slot)
  ARGV[1]  entry ttl   how long a refreshed entry lives without another refresh, milliseconds
  ARGV[2]  waiters     the waiters' names in the queues ("<inbox>:<id>"), i = 1 .. n,
                       separated by single spaces
  ARGV[3]? inbox prefix  one Redis: a waiter "<inbox>:<id>" is told on channel ARGV[3] .. "<inbox>"
                       (as release.lua tells it of a grant); absent on Redis Cluster, whose
                       grants are wake-ups that the waiter's attempt confirms anyway

  Returns
    {r_1, ..., r_n}  per waiter: its lock's PTTL (> 0, -1 or -2) when its entry was refreshed;
                     -4 when it is not queued (any more) and a wake-up reached its inbox;
                     -3 when it is not queued and nobody was told
  Errors
    WRONGTYPE  one of the keys holds a value of another type (the batch stops there: the caller
               wakes its waiters, whose own attempts report it).
]]
local entryTtl = tonumber(ARGV[1])
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local deadline = nowMs + entryTtl
local replies = {}
local i = 0
for waiter in string.gmatch(ARGV[2], '%S+') do
  i = i + 1
  local lockKey, queueKey, aliveKey = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local entry = redis.call('ZSCORE', queueKey, waiter) and redis.call('HGET', aliveKey, waiter)
  local was, rest = string.match(entry or '', '^(%d+) (%d+ %x+)$')
  if not was or tonumber(was) <= nowMs then
    replies[i] = -3
    if ARGV[3] and redis.call('PUBLISH', ARGV[3] .. string.match(waiter, '^(.*):[^:]*$'), waiter .. ' 0') > 0 then
      replies[i] = -4
    end
  else
    redis.call('HSET', aliveKey, waiter, deadline .. ' ' .. rest)
    -- The keys outlive this entry (2 x its ttl), and are never shortened: another manager's entries
    -- (a longer entry ttl: a longer recheck) keep theirs. PTTL reads, where PEXPIRE writes (and replicates).
    if redis.call('PTTL', queueKey) < entryTtl then redis.call('PEXPIRE', queueKey, entryTtl * 2) end
    if redis.call('PTTL', aliveKey) < entryTtl then redis.call('PEXPIRE', aliveKey, entryTtl * 2) end
    replies[i] = redis.call('PTTL', lockKey)
  end
end
return replies
