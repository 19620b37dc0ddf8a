--[[
  fenced-read: read a resource written by fenced-write.

  KEYS[1]  resource key (a hash with fields "value" and "fence")

  Returns
    {value, fence}  the stored value (string) and the fence that wrote it (integer)
    nil             the resource has never been written
  Errors
    WRONGTYPE  KEYS[1] holds a value that is not a hash.
]]
local stored = redis.call('HMGET', KEYS[1], 'value', 'fence')
if not stored[1] then
  return nil
end
return {stored[1], tonumber(stored[2])}
