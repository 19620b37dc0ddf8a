--[[
  record-holder: note who holds a lease (host, process), for operators: `latchkey status`,
  `latchkey list` and Locks.inspect show it. Only written when the manager was created with the
  `holder` option, after the lease was taken; a lease that changed hands meanwhile is left alone.

  KEYS[1]  lock key    string: the holder's token
  KEYS[2]  holder key  hash: token (to tell whose lease it describes), who, since (server ms)
  ARGV[1]  token       the lease's token
  ARGV[2]  who         a description of the holder, e.g. "host-1 pid 4242"

  Returns
    1  recorded; the holder key expires with the lock (extend keeps both, release deletes it)
    0  the lock does not hold ARGV[1] (released, expired or taken meanwhile): nothing written
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local now = redis.call('TIME')
local since = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'who', ARGV[2], 'since', since)
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 then
  redis.call('PEXPIRE', KEYS[2], pttl)
end
return 1
