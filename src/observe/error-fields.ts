import { LeaseLostError, LockError } from '../errors.js';

/** An error's type for the `error.type` attribute of OpenTelemetry's conventions: latchkey's code, or the class name. */
export function errorType(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof LockError || (typeof code === 'string' && code !== '')) return String(code);
  return error instanceof Error ? error.name : typeof error;
}

/**
 * An error as a log record carries it: name, code, message. Not the error itself: a client's error
 * may hold the command it failed on, whose arguments include a lease's token.
 */
export function errorSummary(error: unknown): { name: string; code?: string; message: string; reason?: string } | undefined {
  if (error === undefined) return undefined;
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) };
  const code = (error as { code?: unknown }).code;
  return {
    name: error.name,
    ...(typeof code === 'string' ? { code } : {}),
    message: error.message,
    ...(error instanceof LeaseLostError ? { reason: error.reason } : {}),
  };
}
