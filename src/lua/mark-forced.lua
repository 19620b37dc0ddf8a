--[[
  mark-forced: an operator's forced release (Locks.forceRelease, `latchkey release --force`) notes,
  right before it releases the lease, that the lease with this token is being broken on purpose.
  Its holder, finding its lock gone or taken at its next extend or release, reads the note
  (forced-token.lua) and reports the loss as forced rather than as an expiry. Never on a hot path:
  only forceRelease writes the note, and only a lease that found its lock gone reads it.

  KEYS[1]  lock key    string: the holder's token
  KEYS[2]  forced key  string: the token of the lease broken last by force, in the lock's slot
  ARGV[1]  token       the token forceRelease is about to release
  ARGV[2]  ttl         how long the note lives, milliseconds, positive integer: past the broken
                       lease's own expiry, after which its holder counts it expired anyway

  Returns
    1  noted
    0  the lock does not hold ARGV[1] (it changed hands meanwhile): nothing written
  Errors
    WRONGTYPE  one of the keys holds a value of another type.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
