/**
 * Sleeps up to `ms`, ending early when the function handed to `onWake` is called (a message, an
 * abort, `close()`). Leaves no timer behind, whichever way it ends.
 */
export function sleep(ms: number, onWake: (wake: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    onWake(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
