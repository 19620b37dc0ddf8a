/**
 * The last waiter and the last lease a manager made, kept until it makes the next one or closes.
 *
 * V8 gives the objects of a class their hidden class (map) by transitions from the class's
 * initial map, and holds those transitions weakly: a full GC that finds no object of the class
 * alive clears the maps, and throws away every optimized function that embeds one ("reason: weak
 * objects" in `node --trace-deopt`). The next objects make the maps again, and the calls run slower
 * code until V8 optimizes those functions again. A process that holds no lease and has
 * no call in flight when a full GC runs (V8's memory reducer runs them in processes that look idle,
 * as a lock's waiters between their turns do) lost 22 of latchkey's and ioredis's functions per
 * GC on the uncontended path and 32 on a hand-off, and 3 (Node's own) once one object of each
 * kind was kept alive (`node bench/weak-deopts.mjs`). The cost is a reference per kind, and what
 * that object still points to (its manager's context, a lease's token) stays in memory until the
 * next one replaces it.
 *
 * The other objects made per call keep theirs where they are made: the bounded calls
 * (deadlines.ts), the kept waiters' wake-ups (wait/queue-keeper.ts), the ioredis commands
 * (client/ioredis-commands.ts).
 */
export class LastMade {
  waiter: object | undefined = undefined;
  lease: object | undefined = undefined;

  /** Lets go of both (the manager closed). */
  clear(): void {
    this.waiter = undefined;
    this.lease = undefined;
  }
}
