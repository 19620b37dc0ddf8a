/**
 * The timers latchkey itself leaves armed: a client's own transient timers (ioredis Cluster's
 * slot refresher, whose `disconnect()` arms a timer until its socket closes, after a sharded
 * subscriber it no longer needs went away) are not latchkey's, and a process-wide count of
 * timers saw them now and then.
 */
import { createHook } from 'node:async_hooks';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src') + path.sep;

interface Tracked {
  readonly timer: { hasRef(): boolean; _destroyed?: boolean };
  /** Where latchkey's code armed it. */
  readonly at: string;
}

/** The frame that called setTimeout/setInterval: the first one past the hook and Node's own timer code. */
function creator(stack: string): string | undefined {
  const frames = stack.split('\n').slice(2); // "Error", this hook's init
  return frames.find((f) => !f.includes('node:') && !f.includes('(<anonymous>)'));
}

/**
 * Runs `run` and returns, besides its outcome, where latchkey's code (a file under src/) armed
 * each timer that is still armed and keeps the process alive once `run` settled: a wait that
 * ended must leave none.
 */
export async function ownTimersLeft(run: () => Promise<void>): Promise<string[]> {
  const tracked: Tracked[] = [];
  const limit = Error.stackTraceLimit;
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type !== 'Timeout') return;
      Error.stackTraceLimit = 12;
      const at = creator(new Error().stack ?? '');
      Error.stackTraceLimit = limit;
      if (at?.includes(SRC)) tracked.push({ timer: resource as Tracked['timer'], at: at.trim() });
    },
  });
  hook.enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return tracked.filter((t) => t.timer.hasRef() && t.timer._destroyed !== true).map((t) => t.at);
}
