--[[
  release-key: end a lease on its lock key alone, only if the key still holds the caller's
  token. A fallback of release.lua on Redis Cluster while the lock's slot migrates: a node then
  refuses (TRYAGAIN) a script naming keys of the slot of which only some exist on it, and
  release.lua names the fence, queue and alive keys, which may not exist. A script on one
  key runs wherever that key is (on the source node, or on the target after an ASK redirection).

  It frees the lock and nothing else: no grant, no hand-off, no fence (the next holder's acquire
  issues one above every earlier fence); the queue is left as it is, and its waiters are told to
  look again (wake-queue.lua).

  Also the release of a lone caller on a single Redis, one that expects nobody to wait (its
  manager found the lock free and not contended lately): with KEYS[2], the queue key, it frees the
  lock only when nobody queued for it, in the cheapest call (two keys and one argument, three
  commands); when someone did, it does nothing and says so, and the caller runs release.lua, which
  passes the lock on (one more round trip, and the manager remembers that the lock is contended).

  KEYS[1]  lock key
  KEYS[2]? queue key   given: the lock is released only if this key does not exist
  ARGV[1]  token       token of the lease being released

  Returns
     2  not released: the lock holds the token but KEYS[2] exists (someone queued): release.lua's turn
     1  released (the key is deleted)
     0  not held: the key is gone (the lease expired or was deleted)
    -1  not held: the key holds another token (the lease expired and was taken)
  Errors
    WRONGTYPE  KEYS[1] holds a value that is not a string.
]]
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
    return 2
  end
  redis.call('DEL', KEYS[1])
  return 1
end
if not current then
  return 0
end
return -1
