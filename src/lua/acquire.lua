--[[
  acquire: take a lease on a lock key if it is free, and issue a fencing token.

  One atomic step: SET NX PX and the fence counter together, so a crash can never
  leave a lock without an expiry (the SETNX-then-EXPIRE trap) or a lease without a fence.

  KEYS[1]  lock key           string; holds the holder's token while the lease lives
  KEYS[2]  fence counter key  string; the last fence issued for this lock (an integer)
  ARGV[1]  token              the caller's random token (at least 128 bits, hex)
  ARGV[2]  ttl                lease time to live, milliseconds, positive integer
  ARGV[3]  fence retention    how long the counter outlives the lease, milliseconds

  Returns
    {1, fence}  acquired. fence = max(last fence + 1, server TIME in microseconds), so it
                grows strictly on this server, and stays above earlier fences even when
                the counter was lost (restart without persistence, failover) as long as
                the server clock has not gone back past the last fence.
                If the lock already holds ARGV[1] (a retried or replayed acquire), the
                lease is refreshed to ttl and the fence it was issued is returned again.
    {0, pttl}   held by another token; pttl is its remaining time to live in
                milliseconds, -1 if the key has no expiry.
  Errors
    WRONGTYPE   KEYS[1] or KEYS[2] holds a value that is not a string.
]]
local lockKey = KEYS[1]
local fenceKey = KEYS[2]
local token = ARGV[1]
local ttl = ARGV[2]

if not redis.call('SET', lockKey, token, 'NX', 'PX', ttl) then
  -- GET raises WRONGTYPE itself when the key is not a string.
  if redis.call('GET', lockKey) == token then
    redis.call('PEXPIRE', lockKey, ttl)
    return {1, tonumber(redis.call('GET', fenceKey))}
  end
  return {0, redis.call('PTTL', lockKey)}
end

local last = redis.pcall('GET', fenceKey)
if type(last) == 'table' and last.err then
  -- Leave nothing behind: the lease is not handed out without a fence.
  redis.call('DEL', lockKey)
  return redis.error_reply(last.err)
end

local now = redis.call('TIME')
local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
local previous = last and tonumber(last)
if previous and previous >= fence then
  fence = previous + 1
end
-- Numbers are passed to Redis with %.17g: exact for integers below 2^53.
redis.call('SET', fenceKey, fence, 'PX', tonumber(ttl) + tonumber(ARGV[3]))
return {1, fence}
