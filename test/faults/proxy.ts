/**
 * A TCP fault proxy of our own (Toxiproxy is not installable here), in front of one redis-server.
 * Every accepted connection gets its own upstream connection; the test controls, at any moment:
 *
 * - `latency(ms)`: each chunk, both ways, is delivered `ms` later (order kept per direction);
 * - `blackHole()`: nothing is forwarded either way and the connections stay open (a partition).
 *   Bytes sent meanwhile are queued, as TCP retransmission would, and delivered by `heal()`,
 *   unless `heal({ reset: true })` resets the connections instead;
 * - `holdReplies()` / `deliverReplies()`: server-to-client bytes are held and delivered late,
 *   while commands still reach the server (a stall with the replies in flight);
 * - `resetAll()`: every connection is reset (RST) at once;
 * - `resetOn(text, { forward })`: the next client-to-server chunk that contains `text` resets its
 *   connection, after forwarding the chunk to the server (`forward: true`: the command runs but its
 *   reply is lost) or without forwarding it (the command never runs);
 * - `dropMessages()` / `keepMessages()`: pub/sub messages pushed to a subscriber connection (one
 *   that sent SUBSCRIBE or SSUBSCRIBE) are swallowed, everything else passes (a lost notification);
 * - `retarget(port)`: new connections go to another server, open ones are reset (a failover as
 *   Sentinel makes clients see it).
 *
 * It counts what it did, so a test can wait for a fault to take effect by observing it; it emits
 * 'held' (direction) for each chunk it holds and 'forwarded' (direction, chunk) for each chunk it
 * passes on at once.
 */
import { EventEmitter } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

type Direction = 'up' | 'down';

interface Pipe {
  readonly client: Socket;
  readonly server: Socket;
  /** Chunks held per direction while a black hole or a reply hold is on. */
  readonly held: Record<Direction, Buffer[]>;
  /** The time (ms, monotonic) until which the last chunk of each direction is scheduled. */
  readonly due: Record<Direction, number>;
  closed: boolean;
  /** The client sent SUBSCRIBE or SSUBSCRIBE on this connection. */
  subscriber: boolean;
}

interface ResetRule {
  readonly text: string;
  readonly forward: boolean;
  readonly done: (hit: boolean) => void;
}

export interface ProxyCounts {
  connections: number;
  resets: number;
  heldChunks: number;
  droppedMessages: number;
}

/** A pushed pub/sub message in RESP2 (`message`, `smessage`, `pmessage`) or RESP3 (a `>` push). */
const PUSHED_MESSAGE = /\$[78]\r\n[sp]?message\r\n/;

export class FaultProxy extends EventEmitter {
  #targetPort: number;
  #server: Server | undefined;
  #port = 0;
  readonly #pipes = new Set<Pipe>();
  #latency = 0;
  #blackHole = false;
  #holdReplies = false;
  #resetRules: ResetRule[] = [];
  #dropMessages = false;
  #recentReplies: Buffer[] = [];
  readonly counts: ProxyCounts = { connections: 0, resets: 0, heldChunks: 0, droppedMessages: 0 };

  private constructor(targetPort: number) {
    super();
    this.#targetPort = targetPort;
  }

  /** The port of the server new connections go to. */
  get targetPort(): number {
    return this.#targetPort;
  }

  /** New connections go to `port` from now on; the open ones are reset. */
  retarget(port: number): void {
    this.#targetPort = port;
    this.resetAll();
  }

  /** Swallows every pub/sub message pushed to a subscriber connection until `keepMessages()`. */
  dropMessages(): void {
    this.#dropMessages = true;
  }

  keepMessages(): void {
    this.#dropMessages = false;
  }

  static async start(targetPort: number): Promise<FaultProxy> {
    const proxy = new FaultProxy(targetPort);
    await proxy.#listen();
    return proxy;
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.#port}`;
  }

  /** How many connections are open through the proxy now. */
  get open(): number {
    return this.#pipes.size;
  }

  latency(ms: number): void {
    this.#latency = ms;
  }

  blackHole(): void {
    this.#blackHole = true;
  }

  holdReplies(): void {
    this.#holdReplies = true;
  }

  /** Delivers the held replies and lets replies through again. */
  deliverReplies(): void {
    this.#holdReplies = false;
    this.#flushAll();
  }

  /** Ends a black hole (and a reply hold): queued bytes are delivered, or the connections reset. */
  heal(options: { reset?: boolean } = {}): void {
    this.#blackHole = false;
    this.#holdReplies = false;
    if (options.reset) this.resetAll();
    else this.#flushAll();
  }

  /** Clears every fault: no latency, no black hole, no hold, no pending reset rule. */
  clear(): void {
    this.#latency = 0;
    this.#dropMessages = false;
    for (const rule of this.#resetRules) rule.done(false);
    this.#resetRules = [];
    this.heal();
  }

  resetAll(): void {
    for (const pipe of [...this.#pipes]) this.#reset(pipe);
  }

  /**
   * Resets the connection that next sends a chunk containing `text`; resolves true when it did, or
   * false if the rule was cleared first.
   */
  resetOn(text: string, options: { forward: boolean }): Promise<boolean> {
    return new Promise((resolve) => this.#resetRules.push({ text, forward: options.forward, done: resolve }));
  }

  async stop(): Promise<void> {
    this.clear();
    this.resetAll();
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #listen(): Promise<void> {
    const server = createServer({ noDelay: true }, (client) => this.#accept(client));
    this.#server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        this.#port = typeof address === 'object' && address ? address.port : 0;
        resolve();
      });
    });
  }

  #accept(client: Socket): void {
    const server = createConnection({ port: this.#targetPort, host: '127.0.0.1', noDelay: true });
    const pipe: Pipe = { client, server, held: { up: [], down: [] }, due: { up: 0, down: 0 }, closed: false, subscriber: false };
    this.#pipes.add(pipe);
    this.counts.connections++;
    client.on('data', (chunk: Buffer) => this.#onChunk(pipe, 'up', chunk));
    server.on('data', (chunk: Buffer) => this.#onChunk(pipe, 'down', chunk));
    const close = (): void => this.#close(pipe);
    client.on('close', close);
    server.on('close', close);
    client.on('error', close);
    server.on('error', close);
  }

  #onChunk(pipe: Pipe, direction: Direction, chunk: Buffer): void {
    if (pipe.closed) return;
    if (direction === 'up' && !pipe.subscriber && /s?subscribe/i.test(chunk.toString('latin1'))) pipe.subscriber = true;
    if (direction === 'down' && this.#dropMessages && pipe.subscriber && PUSHED_MESSAGE.test(chunk.toString('latin1'))) {
      this.counts.droppedMessages++;
      this.emit('dropped');
      return;
    }
    if (direction === 'up') {
      const rule = this.#resetRules.find((r) => chunk.includes(r.text));
      if (rule) {
        this.#resetRules = this.#resetRules.filter((r) => r !== rule);
        if (rule.forward) {
          pipe.server.write(chunk, () => {
            this.#reset(pipe);
            rule.done(true);
          });
        } else {
          this.#reset(pipe);
          rule.done(true);
        }
        return;
      }
    }
    if (this.#blackHole || (direction === 'down' && this.#holdReplies) || pipe.held[direction].length > 0) {
      pipe.held[direction].push(chunk);
      this.counts.heldChunks++;
      this.emit('held', direction);
      return;
    }
    this.#send(pipe, direction, chunk);
  }

  #send(pipe: Pipe, direction: Direction, chunk: Buffer): void {
    const target = direction === 'up' ? pipe.server : pipe.client;
    if (this.#latency <= 0 && pipe.due[direction] <= performance.now()) {
      target.write(chunk);
      this.#forwarded(direction, chunk);
      return;
    }
    // Keep the order: a chunk is never delivered before one that came earlier the same way.
    const at = Math.max(performance.now() + this.#latency, pipe.due[direction]);
    pipe.due[direction] = at;
    setTimeout(() => {
      if (!pipe.closed) target.write(chunk);
    }, at - performance.now());
  }

  #forwarded(direction: Direction, chunk: Buffer): void {
    if (direction === 'down') this.#recentReplies = [...this.#recentReplies.slice(-31), chunk];
    this.emit('forwarded', direction, chunk);
  }

  /**
   * Resolves once a server-to-client chunk passed on at once contains `text`, or matches it (one
   * of the last 32 such chunks, or a later one): a reply on its way to the client.
   */
  replySeen(text: string | RegExp): Promise<void> {
    const matches = (chunk: Buffer): boolean => (typeof text === 'string' ? chunk.includes(text) : text.test(chunk.toString('latin1')));
    if (this.#recentReplies.some(matches)) return Promise.resolve();
    return new Promise((resolve) => {
      const onChunk = (direction: Direction, chunk: Buffer): void => {
        if (direction !== 'down' || !matches(chunk)) return;
        this.off('forwarded', onChunk);
        resolve();
      };
      this.on('forwarded', onChunk);
    });
  }

  #flushAll(): void {
    for (const pipe of this.#pipes) {
      for (const direction of ['up', 'down'] as const) {
        if (this.#blackHole || (direction === 'down' && this.#holdReplies)) continue;
        const held = pipe.held[direction].splice(0);
        for (const chunk of held) this.#send(pipe, direction, chunk);
      }
    }
  }

  #reset(pipe: Pipe): void {
    if (pipe.closed) return;
    this.counts.resets++;
    pipe.client.resetAndDestroy();
    pipe.server.resetAndDestroy();
    this.#close(pipe);
  }

  #close(pipe: Pipe): void {
    if (pipe.closed) return;
    pipe.closed = true;
    this.#pipes.delete(pipe);
    pipe.client.destroy();
    pipe.server.destroy();
  }
}
