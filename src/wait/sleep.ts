/**
 * Sleeps up to `ms`, ending early when the function handed to `onWake` is called (a message, an
 * abort, `close()`). Leaves no timer behind, whichever way it ends.
 */
export function sleep(ms: number, onWake: (wake: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    // setTimeout fires at once for delays past 2^31 - 1 ms: a longer sleep is cut there (callers loop).
    const timer = setTimeout(resolve, Math.min(ms, 2 ** 31 - 1));
    onWake(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
