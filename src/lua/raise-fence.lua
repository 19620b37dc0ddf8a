--[[
  raise-fence: lift a lock's fence counter to at least a given value (Redlock). After a quorum of
  nodes has voted for an acquire, each counted its own fence; the lease gets the highest, and the
  other voters are raised to it before the lease is handed out, so that any later majority, which
  shares at least one node with this one, issues a higher fence.

  KEYS[1]  fence key   string: the last fence issued for this lock (an integer)
  ARGV[1]  fence       the fence to raise the counter to
  ARGV[2]  px          time to live of the counter, milliseconds (lease TTL plus retention)

  Returns
    1  the counter is now at least ARGV[1]
  Errors
    WRONGTYPE  the fence key holds a value of another type.
]]
local last = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local fence = tonumber(ARGV[1])
if last < fence then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
