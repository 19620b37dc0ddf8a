/**
 * Client errors that name the command they answer, arguments included: ioredis sets
 * `error.command = { name, args }` on every error reply and on the error of a command cut off by
 * a closed connection. latchkey's script calls carry the lease's token among their arguments,
 * and a failed AUTH carries the password: an error logged whole (`JSON.stringify`, a logger's
 * error serializer, `util.inspect`) would write them out. The arguments are replaced, in place,
 * by as many "[redacted]" (the command's name stays, for the diagnosis).
 */

/** How deep a chain of causes is followed (a chain that loops stops at the first repeat). */
const MAX_DEPTH = 8;

/** Redacts the command arguments of `error` and of the errors it was caused by; returns `error`. */
export function redactCommandArgs<T>(error: T): T {
  const seen = new Set<object>();
  let current: unknown = error;
  for (let depth = 0; depth < MAX_DEPTH && typeof current === 'object' && current !== null && !seen.has(current); depth++) {
    seen.add(current);
    redactOne(current as { command?: unknown });
    const nested = (current as { errors?: unknown }).errors;
    if (Array.isArray(nested)) for (const inner of nested) if (typeof inner === 'object' && inner !== null) redactOne(inner as { command?: unknown });
    current = (current as { cause?: unknown }).cause;
  }
  return error;
}

function redactOne(error: { command?: unknown }): void {
  const command = error.command as { args?: unknown } | undefined;
  if (typeof command !== 'object' || command === null || !Array.isArray(command.args)) return;
  if (command.args.every((arg) => arg === REDACTED)) return;
  try {
    command.args = command.args.map(() => REDACTED);
  } catch {
    // A frozen command object: leave it (nothing latchkey can do about it).
  }
}

const REDACTED = '[redacted]';
