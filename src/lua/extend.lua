--[[
  extend: set a held lease's time to live again, only if the lock still holds the
  caller's token. Never recreates a key that is gone.

  KEYS[1]  lock key
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
  return 1
end
if not current then
  return 0
end
return -1
