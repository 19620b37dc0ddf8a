/**
 * The part of a connection's socket that write coalescing needs: Node's `Writable.cork()` and
 * `uncork()` (a `net.Socket` or `tls.TLSSocket`).
 */
export interface CorkableStream {
  cork(): void;
  uncork(): void;
}

/**
 * The most commands that wait for each other in one corked write. With the whole turn's commands in
 * one write, Node built every command of a turn before Redis saw the first, and Redis ran every
 * script before Node saw the first reply: the two took turns instead of working at the same time.
 * Flushing every 16 commands lets Redis start on the first ones while the rest are being built.
 * Measured with `node bench/ab.mjs` (64 loops on 64 keys): about 23,000 pairs per second with one
 * write per turn, 40,000–45,000 with 16 (8: 40,000–45,000 with more system time; 4 and 32: about
 * 35,000).
 */
export const MAX_CORKED_COMMANDS = 16;

/**
 * Coalesces the commands latchkey sends on one connection in one turn of the event loop into few
 * socket writes.
 *
 * ioredis writes each command to its socket at once: with many locks taken and released at the
 * same time, that is one `write` system call per command, in latchkey's process and one `read` in
 * Redis's. The returned function is called before each command is sent. The first command of a
 * turn corks the connection's socket until the next tick (`process.nextTick`, which runs once the
 * current callbacks and their promise jobs are done), or until `maxCommands` are waiting: the
 * commands sent in between leave in one `writev`. Nothing is delayed past the current turn, and
 * nothing is left on the client: the cork is always undone, on the socket it was put on.
 *
 * (Writing the first command of a turn at once, uncorked, and corking from the second cost one
 * more system call per turn: 64 loops on 64 keys did about 7 % fewer pairs per second with more
 * CPU per pair, `node bench/ab.mjs`; a lone command waits only for the promise jobs of its own
 * turn.)
 *
 * `stream` gives the connection's current socket, or `undefined` when it has none that is ready
 * (connecting, reconnecting, closed): then nothing is corked.
 */
export function coalesceWrites(stream: () => CorkableStream | undefined, maxCommands = MAX_CORKED_COMMANDS): () => void {
  let corked: CorkableStream | undefined;
  let waiting = 0;
  const endTurn = (): void => {
    const s = corked;
    corked = undefined;
    s?.uncork();
  };
  return () => {
    if (corked) {
      if (++waiting <= maxCommands) return;
      // A full batch: send it now, and cork again for the command about to be written.
      corked.uncork();
      corked.cork();
      waiting = 1;
      return;
    }
    const s = stream();
    if (!s) return;
    s.cork();
    corked = s;
    waiting = 1;
    process.nextTick(endTurn);
  };
}
