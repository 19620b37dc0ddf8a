// A counting TCP proxy between the clients under test and redis-server. It forwards bytes both
// ways untouched and parses only the client-to-server direction as RESP, counting top-level
// commands: an array `*N\r\n$len\r\n...` (what every client library sends) or an inline command
// line. Each command is one request/response round trip as far as Redis is concerned, whatever
// Lua it runs inside. SUBSCRIBE/UNSUBSCRIBE on subscriber connections are client requests and
// count; messages Redis pushes to subscribers travel server-to-client and do not.
import net from 'node:net';

const CR = 0x0d;
const STAR = 0x2a;
const DOLLAR = 0x24;

/** Incremental parser of one connection's client-to-server stream. */
class RespCommandCounter {
  #pending = null;

  constructor(onCommand) {
    this.onCommand = onCommand;
  }

  push(chunk) {
    const buf = this.#pending ? Buffer.concat([this.#pending, chunk]) : chunk;
    let pos = 0;
    for (;;) {
      const next = this.#parseOne(buf, pos);
      if (next < 0) break;
      pos = next;
    }
    this.#pending = pos < buf.length ? Buffer.from(buf.subarray(pos)) : null;
  }

  /** Parses one command at `pos`; returns the position after it, or -1 if it is incomplete. */
  #parseOne(buf, pos) {
    if (pos >= buf.length) return -1;
    if (buf[pos] === STAR) {
      const headerEnd = buf.indexOf('\r\n', pos, 'latin1');
      if (headerEnd < 0) return -1;
      const count = Number.parseInt(buf.toString('latin1', pos + 1, headerEnd), 10);
      let p = headerEnd + 2;
      let name = '';
      for (let i = 0; i < count; i++) {
        if (p >= buf.length) return -1;
        if (buf[p] !== DOLLAR) {
          // Not a bulk string (clients never send anything else): treat the line as opaque.
          const end = buf.indexOf('\r\n', p, 'latin1');
          if (end < 0) return -1;
          p = end + 2;
          continue;
        }
        const lenEnd = buf.indexOf('\r\n', p, 'latin1');
        if (lenEnd < 0) return -1;
        const len = Number.parseInt(buf.toString('latin1', p + 1, lenEnd), 10);
        const dataStart = lenEnd + 2;
        const after = dataStart + Math.max(0, len) + 2;
        if (after > buf.length) return -1;
        if (i === 0) name = buf.toString('latin1', dataStart, dataStart + Math.min(len, 40)).toUpperCase();
        p = after;
      }
      if (count > 0) this.onCommand(name);
      return p;
    }
    // Inline command: one line ending in \n (usually \r\n).
    const lineEnd = buf.indexOf(0x0a, pos);
    if (lineEnd < 0) return -1;
    const end = lineEnd > pos && buf[lineEnd - 1] === CR ? lineEnd - 1 : lineEnd;
    const line = buf.toString('latin1', pos, end).trim();
    if (line.length > 0) this.onCommand(line.split(/\s+/, 1)[0].toUpperCase());
    return lineEnd + 1;
  }
}

/**
 * Starts a proxy on a free loopback port forwarding to 127.0.0.1:`targetPort`.
 * `snapshot()` returns the running totals `{ total, byCommand }`; subtract two snapshots to count
 * the commands sent in between.
 */
export async function startCountingProxy(targetPort) {
  let total = 0;
  const byCommand = new Map();
  const sockets = new Set();
  const count = (name) => {
    total++;
    byCommand.set(name, (byCommand.get(name) ?? 0) + 1);
  };
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: targetPort });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    sockets.add(client);
    sockets.add(upstream);
    const counter = new RespCommandCounter(count);
    client.on('data', (chunk) => {
      counter.push(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => client.write(chunk));
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', closeBoth);
    upstream.on('close', closeBoth);
    client.on('error', closeBoth);
    upstream.on('error', closeBoth);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: server.address().port,
    snapshot: () => ({ total, byCommand: Object.fromEntries(byCommand) }),
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Connection teardown: not lock traffic, left out of totals (still listed in byCommand). */
const NOT_COUNTED = new Set(['QUIT']);

/** Commands sent between two snapshots: `{ total, byCommand }`. */
export function diffCounts(before, after) {
  const byCommand = {};
  let total = 0;
  for (const [name, n] of Object.entries(after.byCommand)) {
    const d = n - (before.byCommand[name] ?? 0);
    if (d > 0) byCommand[name] = d;
    if (d > 0 && !NOT_COUNTED.has(name)) total += d;
  }
  return { total, byCommand };
}
