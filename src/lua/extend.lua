--[[
  extend: set a held lease's time to live again, only if the lock still holds the
  caller's token. Never recreates a key that is gone.

  KEYS[1]  lock key
  KEYS[2]? holder key  hash describing the holder: kept as long as the lease. Passed only by a
                       lease that recorded its holder: on Redis Cluster, a key that does not
                       exist sent with one that does is refused while the slot migrates
                       (TRYAGAIN), so the renewal of a lease without a record names its lock key
                       alone (one key is also less work for Redis and the client)
  ARGV[1]  token of the lease being extended
  ARGV[2]  new time to live, milliseconds, positive integer (counted from now)

  Returns
     1  extended
     0  not held: the key is gone (the lease expired or was deleted)
    -1  not held: the key holds another token (the lease expired and was taken)
  Errors
    WRONGTYPE  KEYS[1] holds a value that is not a string.
]]
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
  return 1
end
if not current then
  return 0
end
return -1
