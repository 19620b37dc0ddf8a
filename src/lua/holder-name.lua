--[[
  holder-name: who registered under a manager's tag (see register-holder.lua), read-only.

  KEYS[1]  registry key  string: "<prefix>holder:<tag>"

  Returns
    who    the description the manager registered
    false  none (the manager registers nothing: its `holder` option is false; or the entry
           expired)
  Errors
    WRONGTYPE  the key holds a value of another type.
]]
return redis.call('GET', KEYS[1])
