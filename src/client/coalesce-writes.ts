/**
 * The part of a connection's socket that write coalescing needs: Node's `Writable.cork()` and
 * `uncork()` (a `net.Socket` or `tls.TLSSocket`).
 */
export interface CorkableStream {
  cork(): void;
  uncork(): void;
}

/**
 * Coalesces the commands latchkey sends on one connection in one turn of the event loop into one
 * socket write.
 *
 * ioredis writes each command to its socket at once: with many locks taken and released at the
 * same time, that is one `write` system call per command, in latchkey's process and one `read` in
 * Redis's. The returned function, called before each command is sent, corks the connection's
 * socket the first time in a turn and uncorks it on the next tick (`process.nextTick`, which runs
 * once the current callbacks and their promise jobs are done): every command sent in between
 * leaves in one `writev`. Nothing is delayed past the current turn, and nothing is left on the
 * client: the cork is always undone, on the socket it was put on.
 *
 * `stream` gives the connection's current socket, or `undefined` when it has none that is ready
 * (connecting, reconnecting, closed): then nothing is corked.
 */
export function coalesceWrites(stream: () => CorkableStream | undefined): () => void {
  let corked: CorkableStream | undefined;
  const uncork = (): void => {
    const s = corked;
    corked = undefined;
    s?.uncork();
  };
  return () => {
    if (corked) return;
    const s = stream();
    if (!s) return;
    s.cork();
    corked = s;
    process.nextTick(uncork);
  };
}
