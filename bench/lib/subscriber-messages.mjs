// The moment a grant reaches a waiting process: bench/trace-handoff.mjs and bench/grant-path.mjs
// time a lock phase from a subscriber connection's 'message' event.

/**
 * Makes every connection that ioredis's `Redis` class duplicates from now on (a subscriber: the
 * ring's, the scripts', the one latchkey makes) call `onMessage` first on each 'message' event,
 * before the lock library's own listener.
 */
export function onSubscriberMessages(Redis, onMessage) {
  const duplicate = Redis.prototype.duplicate;
  Redis.prototype.duplicate = function (...args) {
    const copy = duplicate.apply(this, args);
    copy.prependListener('message', onMessage);
    return copy;
  };
}
