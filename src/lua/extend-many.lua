--[[
  extend-many: set the time to live of several held leases again, each only if its lock still
  holds that lease's token (extend.lua for many leases in one call: the watchdog's batched
  renewals). Never recreates a key that is gone. Each lease gets its own status: a lease whose
  key is gone or taken does not stop the others from being extended.

  The caller caps n (500 leases a call: see MAX_BATCH in src/backend/extend-many.ts), so that one
  call never blocks the server long. On Redis Cluster every key must be in one slot.

  KEYS[i]    lock key of lease i       (i = 1 .. n, n >= 1)
  ARGV[1]    new time to live of every lease, milliseconds, positive integer (counted from now):
             leases of other TTLs go in other calls
  ARGV[i+1]  token of lease i

  Returns
    {s_1, ..., s_n}  one status per lease, in order, as extend.lua's:
       1  extended
       0  not held: the key is gone (the lease expired or was deleted)
      -1  not held: the key holds another token (the lease expired and was taken)
      -2  not looked at: the key holds a value that is not a string (WRONGTYPE); the other
          leases are still extended
]]
local ttl = ARGV[1]
local status = {}
for i = 1, #KEYS do
  local current = redis.pcall('GET', KEYS[i])
  if type(current) == 'table' and current.err then
    status[i] = -2
  elseif current == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ttl)
    status[i] = 1
  elseif not current then
    status[i] = 0
  else
    status[i] = -1
  end
end
return status
