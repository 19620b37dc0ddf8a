--[[
  release: end a lease, only if the lock still holds the caller's token.

  GET, compare and DEL in one atomic step: a holder whose lease expired and was taken
  by someone else never deletes the new holder's lock.

  KEYS[1]  lock key
  ARGV[1]  token of the lease being released
  ARGV[2]  channel to announce the release on (PUBLISH; waiters listen there)

  Returns
     1  released; the key was deleted and the release published
     0  not held: the key is gone (the lease expired or was deleted)
    -1  not held: the key holds another token (the lease expired and was taken)
  Errors
    WRONGTYPE  KEYS[1] holds a value that is not a string.
]]
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
if not current then
  return 0
end
return -1
