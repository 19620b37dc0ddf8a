/**
 * A legacy client: the timestamp lock of the seed articles (000, 001, 003), written as they
 * describe it, to run as a peer of latchkey's compat mode on the same key. Not latchkey code and
 * not a model of good locking: it keeps the seeds' traps on purpose.
 *
 * From 000's C# (CSRedis), step for step:
 *
 *   now = DateTimeOffset.Now.ToUnixTimeMilliseconds(); lock_time = now + _lock_timeout + 1;
 *   getlocked = SETNX(key, lock_time);
 *   if (getlocked || now > GET<long>(key) && now > GETSET<long>(key, lock_time)) getlocked = true;
 *   else Thread.Sleep(30);
 *   ... work ...
 *   if (DateTimeOffset.Now.ToUnixTimeMilliseconds() < GET<long>(key)) DEL(key);   // release
 *
 * - The value is a Unix timestamp in milliseconds (000's ToUnixTimeMilliseconds, 003's
 *   System.currentTimeMillis), a bare decimal integer: 003 parses it with Long.valueOf, which
 *   accepts nothing else.
 * - `now` is read once per attempt, before SETNX, and reused for both comparisons (as in 000 and
 *   003's innerTryLock).
 * - A GET or GETSET that finds no key reads as 0 (CSRedis's Get<long> of a nil is default(long)):
 *   "expired", so the peer goes on to GETSET, and a GETSET that returns nothing wins.
 * - The release re-reads the key and deletes it if the timestamp there is still in the future by
 *   the peer's clock (000, and 003's Demo1 and RedisLockHandler). It does not check whose
 *   timestamp it is: that is the seeds' rule, and the reason a peer that overruns its timeout can
 *   delete the next holder's lock.
 * - `unit: 1000` is the same algorithm in Unix seconds (the original SETNX documentation's form).
 */
import type { Redis } from 'ioredis';

export interface TimestampPeerOptions {
  /** The lock's timeout, in the timestamp's unit (000 uses 40 ms; use one longer than the work). */
  readonly timeout: number;
  /** Sleep between attempts, ms (000: 30). */
  readonly spin?: number;
  /** The peer's clock in ms since the epoch: a skewed clock for the clock-skew case. Default Date.now. */
  readonly clock?: () => number;
  /** Milliseconds per timestamp unit: 1 (default) or 1000 (seconds). */
  readonly unit?: 1 | 1000;
}

/** A legacy Long.valueOf / Get<long>: a bare integer, and a missing key reads as 0. */
function toLong(value: string | null): number {
  if (value === null) return 0;
  if (!/^-?\d+$/.test(value)) throw new Error(`NumberFormatException: For input string: "${value}"`);
  return Number(value);
}

export class TimestampPeer {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #timeout: number;
  readonly #spin: number;
  readonly #clock: () => number;
  readonly #unit: number;

  constructor(redis: Redis, key: string, options: TimestampPeerOptions) {
    this.#redis = redis;
    this.#key = key;
    this.#timeout = options.timeout;
    this.#spin = options.spin ?? 30;
    this.#clock = options.clock ?? Date.now;
    this.#unit = options.unit ?? 1;
  }

  /** The peer's "current Unix time", in the timestamp's unit. */
  now(): number {
    return Math.floor(this.#clock() / this.#unit);
  }

  /** One attempt (000's loop body): true when the lock was taken. */
  async tryLock(): Promise<boolean> {
    const now = this.now();
    const lockTime = String(now + this.#timeout + 1);
    if ((await this.#redis.setnx(this.#key, lockTime)) === 1) return true;
    // `&&` short-circuits: GETSET only when GET showed an expired timestamp.
    return now > toLong(await this.#redis.get(this.#key)) && now > toLong(await this.#redis.getset(this.#key, lockTime));
  }

  /** 000's getlock: attempts until taken, sleeping `spin` ms between them (the peer's algorithm, not a test sleep). */
  async lock(): Promise<void> {
    while (!(await this.tryLock())) await new Promise((r) => setTimeout(r, this.#spin));
  }

  /** The seeds' release: DEL if the key's timestamp is still in the future. True when it deleted. */
  async unlock(): Promise<boolean> {
    if (this.now() < toLong(await this.#redis.get(this.#key))) {
      await this.#redis.del(this.#key);
      return true;
    }
    return false;
  }
}
