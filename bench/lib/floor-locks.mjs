// The floors under the Redlock goals, shared by bench/floors.mjs and bench/quorum.mjs: what a
// round trip and the smallest correct lock cost over one node and over a majority of several.
import { randomBytes } from 'node:crypto';
import { DELETE_IF_EQUAL, SET_AND_CLOCK_FENCE, SET_IF_FREE } from './smallest-lock.mjs';

/** Defines the smallest locks' scripts as commands on an ioredis client (once per client). */
export function defineSmallestLock(client) {
  client.defineCommand('deleteIfEqual', { numberOfKeys: 1, lua: DELETE_IF_EQUAL });
  client.defineCommand('setIfFree', { numberOfKeys: 1, lua: SET_IF_FREE });
  client.defineCommand('setIfFreeAndClockFence', { numberOfKeys: 2, lua: SET_AND_CLOCK_FENCE });
}

/** Resolves when `n` of the promises resolved (a majority by default): the later ones are not waited for. */
export const majority = (promises, n = Math.floor(promises.length / 2) + 1) =>
  new Promise((resolve, reject) => {
    let done = 0;
    for (const p of promises) p.then(() => ++done === n && resolve(), reject);
  });

/** Two PINGs, each sent to every node and done when a majority answered: the round-trip floor. */
export async function twoPings(nodes) {
  await majority(nodes.map((c) => c.ping()));
  await majority(nodes.map((c) => c.ping()));
}

/**
 * Takes `key` on a majority of `nodes` with the smallest lock, then the caller releases it with
 * the function returned. `how`: undefined (SET NX PX), 'scripted' (the same in a script) or
 * 'clock-fenced' (with latchkey's fence: lib/smallest-lock.mjs). The clients need
 * defineSmallestLock.
 */
export async function smallestLock(nodes, key, how) {
  const token = randomBytes(16).toString('hex');
  const set = (c) =>
    how === 'scripted' ? c.setIfFree(key, token, 10_000) : how === 'clock-fenced' ? c.setIfFreeAndClockFence(key, `${key}:fence`, token, 10_000) : c.set(key, token, 'PX', 10_000, 'NX');
  await majority(nodes.map(set));
  return () => majority(nodes.map((c) => c.deleteIfEqual(key, token)));
}
