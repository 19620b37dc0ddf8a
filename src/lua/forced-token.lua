--[[
  forced-token: the token of the lease an operator broke last on this lock (see mark-forced.lua),
  read by a lease that found its lock gone or taken, to tell a forced release from an expiry.

  KEYS[1]  forced key  string: the token of the lease broken last by force

  Returns
    token  the token noted, while the note lives
    nil    no note (none was written, or it expired)
  Errors
    WRONGTYPE  the key holds a value of another type.
]]
return redis.call('GET', KEYS[1])
