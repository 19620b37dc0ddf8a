/**
 * What the unit tests of a waiter's odd replies share: the backend module with `chooseBackend`
 * wrapped, so that a test overrides some calls of the chosen backend (the in-memory one: a product
 * feature, not a mock of Redis). Managers on it: memory-managers.ts.
 *
 * vitest hoists `vi.mock` above the imports, so a test file imports this module inside its mock
 * factory; it imports nothing of latchkey's at run time (the mocked module would wait for itself): `vi.mock(path, async (o) => (await import('../helpers/wrapped-backend.js')).wrapChosenBackend(await o(), wrap))`.
 */
import type { Backend } from '../../src/backend/backend.js';
import type * as Choose from '../../src/backend/choose.js';

/** Switches for {@link gatedAcquire}: `holdNext` holds the next attempt that queues; `ran` sees it ran; `attempts` counts every attempt. */
export interface AcquireGate {
  holdNext: boolean;
  gate: Promise<void>;
  ran: () => void;
  attempts: number;
}

/** An {@link AcquireGate} that holds nothing: a test's gate at the start, and what it is reset to between tests. */
export function openGate(): AcquireGate {
  return { holdNext: false, gate: Promise.resolve(), ran: () => {}, attempts: 0 };
}

/**
 * `backend`'s acquire, with the reply of the next attempt that queues (while `state.holdNext` is
 * set) held back until `state.gate` settles: the attempt runs, `state.ran()` is called, then the
 * reply waits. For a test of what reaches a waiter while its attempt is in flight.
 */
export function gatedAcquire(backend: Backend, state: AcquireGate): Backend['acquire'] {
  return async (...call) => {
    state.attempts++;
    const held = state.holdNext && call[3] !== undefined; // an attempt that queues
    if (held) state.holdNext = false;
    const reply = await backend.acquire(...call);
    if (held) {
      state.ran();
      await state.gate;
    }
    return reply;
  };
}

/** `original` with its `chooseBackend` returning the chosen backend with `wrap`'s calls in place of its own. */
export function wrapChosenBackend(original: typeof Choose, wrap: (backend: Backend) => Partial<Backend>): typeof Choose {
  return {
    ...original,
    chooseBackend: (...args: Parameters<typeof original.chooseBackend>): Backend => {
      const backend = original.chooseBackend(...args);
      return { ...backend, name: backend.name, handsOff: backend.handsOff, semaphores: backend.semaphores, ...wrap(backend) };
    },
  };
}
