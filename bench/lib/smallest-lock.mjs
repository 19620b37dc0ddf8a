// The scripts of the smallest correct locks the floors are measured with (bench/floors.mjs,
// bench/ab.mjs's `smallest*` contenders, bench/script-cost.mjs): Redis 7.0 has no single command
// that deletes a key only if it holds a value, so even the smallest lock releases with a script.

/** Release: deletes KEYS[1] if it holds ARGV[1] (the token). */
export const DELETE_IF_EQUAL = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/** Acquire, as a script: SET KEYS[1] ARGV[1] NX PX ARGV[2] (what running a script at all costs). */
export const SET_IF_FREE = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";

/** Acquire with a fencing token: SET NX PX, then INCR of the counter KEYS[2]; nil when held. */
export const SET_AND_FENCE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return false";

/**
 * Acquire with a fencing token that stays above earlier ones when the counter is lost or rolled
 * back (a restart without persistence, a failover to a replica that missed the last writes), as
 * latchkey's: SET NX PX, then the counter KEYS[2] set to max(server TIME in µs, last + 1), read and
 * written in one SET ... GET, kept for the lease plus a day; nil when held. The smallest lock with
 * latchkey's fence guarantee, where SET_AND_FENCE's INCR gives the last fence + 1 again after a
 * rollback.
 */
export const SET_AND_CLOCK_FENCE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local fence = t[1] * 1000000 + t[2]
  local previous = tonumber(redis.call('SET', KEYS[2], fence, 'PX', ARGV[2] + 86400000, 'GET') or '')
  if previous and previous >= fence then
    fence = previous + 1
    redis.call('SET', KEYS[2], fence, 'PX', ARGV[2] + 86400000)
  end
  return fence
end
return false`;
