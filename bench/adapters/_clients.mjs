// Client connections shared by the adapters: ioredis for most libraries, node-redis for the one
// that requires it, both of the major BENCH_CLIENTS picks (lib/clients.mjs: 6 by default, or 5),
// so that latchkey and every peer run on the same client major. Every adapter opens its own
// client(s) from the URL it is given, so in the round-trip pass all of a library's traffic
// (subscriber connections it duplicates included) goes through the counting proxy.
// The client libraries are imported on first use: a worker loads only the one it needs, which
// keeps process start-up short.
import { importIoredis, importNodeRedis } from '../lib/clients.mjs';

export async function connectIoredis(url) {
  const { Redis } = await importIoredis();
  const client = new Redis(url, { lazyConnect: true });
  client.on('error', () => {}); // reported by the commands that fail
  await client.connect();
  return client;
}

export async function closeIoredis(client) {
  await client.quit().catch(() => client.disconnect());
}

export async function connectNodeRedis(url) {
  const { createClient } = await importNodeRedis();
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  return client;
}

export async function closeNodeRedis(client) {
  await client.close().catch(() => client.destroy());
}

/** The retry settings of the "fast" variants: 2 ms between attempts, for about 10 s. */
export const FAST = { delay: 2, attempts: 5000, waitMs: 10_000 };
