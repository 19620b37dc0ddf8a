/**
 * The client × protocol matrix the contract suite runs on: each supported major of ioredis and
 * node-redis, under each protocol it speaks. The packages `ioredis` and `redis` are the current
 * majors (what `npm install ioredis redis` gives a user); `ioredis5` and `redis5` are npm aliases
 * of the previous ones, installed beside them (package.json devDependencies).
 *
 * ioredis 5 has no RESP3 (no `protocol` option, no RESP3 parser): it is in the matrix once.
 */
import { Redis as Redis6 } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { createClient as createClient6 } from 'redis';
import { createClient as createClient5 } from 'redis5';
import type { IoredisClientLike } from '../../src/index.js';

/** What the harness needs of a client of the ioredis family (ioredis 5 or 6, iovalkey). */
export interface IoredisFamilyClient extends IoredisClientLike {
  /** `ready` once the connection passed its ready check. */
  readonly status?: string;
  call(command: string, ...args: string[]): Promise<unknown>;
  once(event: 'ready', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  quit(): Promise<unknown>;
  disconnect(): void;
}

/** What the harness needs of a node-redis client (5 or 6). */
export interface NodeRedisFamilyClient {
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  destroy(): void;
  sendCommand(args: string[]): Promise<unknown>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

export interface IoredisCell {
  readonly driver: 'ioredis';
  /** For test names: the client, its major and the protocol. */
  readonly label: string;
  /** A new client on a local server (it connects by itself). */
  make(port: number): IoredisFamilyClient;
}

export interface NodeRedisCell {
  readonly driver: 'node-redis';
  readonly label: string;
  /** A new client on `url`, not yet connected. */
  make(url: string): NodeRedisFamilyClient;
}

export type ClientCell = IoredisCell | NodeRedisCell;

const HOST = '127.0.0.1';

export const IOREDIS_6: IoredisCell = {
  driver: 'ioredis',
  label: 'ioredis 6, RESP3 (its default: legacy reply mapping)',
  make: (port) => new Redis6(port, HOST),
};

export const IOREDIS_6_RESP3_MAPPING: IoredisCell = {
  driver: 'ioredis',
  label: "ioredis 6, RESP3 with replyMapping: 'resp3'",
  make: (port) => new Redis6(port, HOST, { replyMapping: 'resp3' }),
};

export const IOREDIS_6_RESP2: IoredisCell = {
  driver: 'ioredis',
  label: 'ioredis 6, RESP2 (protocol: 2)',
  make: (port) => new Redis6(port, HOST, { protocol: 2 }),
};

export const IOREDIS_5: IoredisCell = {
  driver: 'ioredis',
  label: 'ioredis 5, RESP2 (it has no RESP3)',
  make: (port) => new Redis5(port, HOST),
};

export const NODE_REDIS_6: NodeRedisCell = {
  driver: 'node-redis',
  label: 'node-redis 6, RESP3 (its default)',
  make: (url) => createClient6({ url }),
};

export const NODE_REDIS_6_RESP2: NodeRedisCell = {
  driver: 'node-redis',
  label: 'node-redis 6, RESP2 (RESP: 2)',
  make: (url) => createClient6({ url, RESP: 2 }),
};

export const NODE_REDIS_5: NodeRedisCell = {
  driver: 'node-redis',
  label: 'node-redis 5, RESP2 (its default)',
  make: (url) => createClient5({ url }),
};

export const NODE_REDIS_5_RESP3: NodeRedisCell = {
  driver: 'node-redis',
  label: 'node-redis 5, RESP3 (RESP: 3)',
  make: (url) => createClient5({ url, RESP: 3 }),
};

/** Every cell, the defaults of the current majors first. */
export const CLIENT_CELLS: readonly ClientCell[] = [
  IOREDIS_6,
  NODE_REDIS_6,
  IOREDIS_6_RESP3_MAPPING,
  IOREDIS_6_RESP2,
  IOREDIS_5,
  NODE_REDIS_6_RESP2,
  NODE_REDIS_5,
  NODE_REDIS_5_RESP3,
];
