--[[
  semaphore-release-key: give back a holder's permits on the permits hash (and the holders set,
  when given) alone, only if its lease is still there. A fallback of semaphore-release.lua on
  Redis Cluster while the semaphore's slot migrates: a node then refuses (TRYAGAIN) a script naming
  keys of the slot of which only some exist on it, and semaphore-release.lua names the queue and
  alive keys, which exist only while someone waits. The holders set and the permits hash exist
  together while a permit is held (written together, same expiry), so the two-key form runs
  wherever they are; should a migration have split them (moved in different batches), the
  permits hash alone is enough: it is what semaphore-acquire.lua counts, and it drops a holder
  whose entry no longer names permits when that holder's expiry comes.

  It gives back the permits and nothing else: the queue is left as it is, and its waiters are told
  to look again (wake-queue.lua, on the queue key alone).

  KEYS[1]  permits key hash: token -> "<permits> <fence>", and "#used" -> permits in use
  KEYS[2]? holders key sorted set: token -> expiry (server ms); the caller's entry is removed
  ARGV[1]  token       the lease's token

  Returns
    1  released
    0  not held: the lease expired (with KEYS[2]: its expiry passed, or its permits came back
       already) or was never there
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
local mine = redis.call('HGET', KEYS[1], ARGV[1])
if not mine then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[1], '#used', -tonumber(string.match(mine, '^(%d+)')))
if not KEYS[2] then
  return 1
end
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) <= nowMs then
  return 0
end
return 1
