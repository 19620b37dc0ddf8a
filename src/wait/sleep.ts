/**
 * Sleeps up to `ms`, ending early when `wake` is called (a release was announced) and rejecting
 * when `signal` aborts. Leaves no timer or listener behind, whichever way it ends.
 */
export function sleep(ms: number, signal: AbortSignal | undefined, onWake?: (wake: () => void) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      done();
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    onWake?.(() => {
      done();
      resolve();
    });
  });
}
