--[[
  extend-many: set the time to live of several held leases again, each only if its lock still
  holds that lease's token (extend.lua for many leases in one call: the watchdog's batched
  renewals). Never recreates a key that is gone. Each lease gets its own status: a lease whose
  key is gone or taken does not stop the others from being extended.

  The caller caps n (500 leases a call: see MAX_BATCH in src/backend/backend.ts), so that one
  call never blocks the server long. On Redis Cluster every key must be in one slot.

  The tokens travel as one argument, and only the leases not extended are answered: a call's
  cost on both sides grows with the number of its arguments and reply elements, and nearly every
  renewal extends (measured in bench/script-cost.mjs and bench/scale.mjs).

  KEYS[i]    lock key of lease i       (i = 1 .. n, n >= 1)
  ARGV[1]    new time to live of every lease, milliseconds, positive integer (counted from now):
             leases of other TTLs go in other calls
  ARGV[2]    w: the length of every token, positive integer: tokens of other lengths go in
             other calls
  ARGV[3]    the n tokens, each w characters, one after the other: token i is characters
             (i - 1) * w + 1 .. i * w

  Returns
    {}                      every lease was extended
    {i_1, s_1, i_2, s_2 ...}  the leases not extended, by index (1-based, ascending), each with
                            its status, as extend.lua's:
       0  not held: the key is gone (the lease expired or was deleted)
      -1  not held: the key holds another token (the lease expired and was taken)
      -2  not looked at: the key holds a value that is not a string (WRONGTYPE); the other
          leases are still extended
    an error reply when ARGV[3] is not n * w characters long (nothing is extended)
]]
local ttl = ARGV[1]
local w = tonumber(ARGV[2])
local tokens = ARGV[3]
if not w or w < 1 or #tokens ~= #KEYS * w then
  return redis.error_reply('ERR extend-many: ' .. #KEYS .. ' keys, but ' .. #tokens .. ' characters of tokens of length ' .. tostring(ARGV[2]))
end
-- One MGET for the batch, not a GET per lease: a call from a script costs about as much as the
-- command itself. MGET answers nil for a key that is not a string: such a key is looked at again
-- alone, to tell gone from WRONGTYPE.
local current = redis.call('MGET', unpack(KEYS))
local sub = string.sub
local missed = {}
for i = 1, #KEYS do
  local value = current[i]
  if value and value == sub(tokens, (i - 1) * w + 1, i * w) then
    redis.call('PEXPIRE', KEYS[i], ttl)
  else
    local status = -1
    if not value then
      local again = redis.pcall('GET', KEYS[i])
      status = (type(again) == 'table' and again.err) and -2 or 0
    end
    missed[#missed + 1] = i
    missed[#missed + 1] = status
  end
end
return missed
