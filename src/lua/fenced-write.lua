--[[
  fenced-write: write a value to a resource only if the writer's fence is at least
  the highest fence that resource has accepted. A holder that paused past its lease
  (GC, SIGSTOP, swap) and wakes up with an old fence is refused.

  The resource is a hash with two fields: "value" (the caller's data) and "fence"
  (the highest fence accepted so far).

  KEYS[1]  resource key (the caller's own key, not namespaced by latchkey)
  ARGV[1]  value to store
  ARGV[2]  fence of the writer's lease (a positive integer, decimal)

  Returns
    {1, fence}    accepted; fence is the writer's fence, now the highest seen
    {0, highest}  refused; highest is the fence that made this write stale
  Errors
    WRONGTYPE  KEYS[1] holds a value that is not a hash.
]]
local highest = redis.call('HGET', KEYS[1], 'fence')
local fence = tonumber(ARGV[2])
if highest and tonumber(highest) > fence then
  return {0, tonumber(highest)}
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return {1, fence}
