// The scripts of the smallest correct locks the floors are measured with (bench/floors.mjs,
// bench/ab.mjs's `smallest*` contenders, bench/script-cost.mjs): Redis 7.0 has no single command
// that deletes a key only if it holds a value, so even the smallest lock releases with a script.

/** Release: deletes KEYS[1] if it holds ARGV[1] (the token). */
export const DELETE_IF_EQUAL = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/** Acquire, as a script: SET KEYS[1] ARGV[1] NX PX ARGV[2] (what running a script at all costs). */
export const SET_IF_FREE = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";

/** Acquire with a fencing token: SET NX PX, then INCR of the counter KEYS[2]; nil when held. */
export const SET_AND_FENCE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return false";
