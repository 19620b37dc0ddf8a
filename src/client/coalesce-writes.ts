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
 * Redis's. The returned function is called before each command is sent. Commands sent in one turn
 * are corked on the connection's socket until the next tick (`process.nextTick`, which runs once
 * the current callbacks and their promise jobs are done), or until `maxCommands` are waiting: the
 * commands sent in between leave in one `writev`. Nothing is delayed past the current turn, and
 * nothing is left on the client: the cork is always undone, on the socket it was put on.
 *
 * The first command of a turn is corked too when the connection's last busy turn sent several
 * (many locks at once: one system call fewer per turn; 64 loops on 64 keys did about 7 % more
 * pairs per second with less CPU per pair, `node bench/ab.mjs`); after a turn that sent one, it is
 * written at once: a lone command (one lock taken at a time, or one node of a Redlock fan-out,
 * where each node has its own connection) never waits for the code that runs after it in the turn
 * (with five nodes, building the other four commands).
 *
 * `stream` gives the connection's current socket, or `undefined` when it has none that is ready
 * (connecting, reconnecting, closed): then nothing is corked.
 *
 * A turn's end is learnt from `process.nextTick` once the turn sends a second command. A turn that
 * sent one so far learns it from a promise job instead, which costs no call into Node (a tick is
 * about fifteen: its queue, its async-context bookkeeping); a command that comes after that job in
 * the same turn counts as the first of another. Every lone command (one lock taken at a time, every
 * hand-off between processes) sent a tick of its own before.
 */
export function coalesceWrites(stream: () => CorkableStream | undefined, maxCommands = MAX_CORKED_COMMANDS): () => void {
  /** Commands sent in this turn so far (0: none yet), and in the last turn that sent any. */
  let thisTurn = 0;
  let lastTurn = 0;
  let corked: CorkableStream | undefined;
  let waiting = 0;
  /** True while a tick will end this turn (it sent several commands, or the last turn did). */
  let ticking = false;
  /** True while the promise job queued for a lone turn is to end it (no tick took over). */
  let lone = false;
  const endTurn = (): void => {
    ticking = false;
    lastTurn = thisTurn;
    thisTurn = 0;
    const s = corked;
    corked = undefined;
    s?.uncork();
  };
  /** The end of a turn that had sent one command when it was scheduled (unless a tick ends it). */
  const endLoneTurn = (): void => {
    if (!lone) return;
    lone = false;
    lastTurn = thisTurn;
    thisTurn = 0;
  };
  return () => {
    if (corked) {
      thisTurn++;
      if (++waiting <= maxCommands) return;
      // A full batch: send it now, and cork again for the command about to be written.
      corked.uncork();
      corked.cork();
      waiting = 1;
      return;
    }
    if (thisTurn++ === 0 && lastTurn <= 1) {
      // A lone command, as the last turn's: written at once.
      lone = true;
      void LATER.then(endLoneTurn);
      return;
    }
    if (!ticking) {
      ticking = true;
      lone = false; // the tick ends this turn
      process.nextTick(endTurn);
    }
    const s = stream();
    if (!s) return;
    s.cork();
    corked = s;
    waiting = 1;
  };
}

/** Resolved: `.then` on it queues a promise job. */
const LATER = Promise.resolve();
