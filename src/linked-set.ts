/** An item's links in the one {@link LinkedSet} that holds it, set and cleared by that set alone. */
const PREV = Symbol('latchkey.linked.prev');
const NEXT = Symbol('latchkey.linked.next');
const IN = Symbol('latchkey.linked.in');

interface Linked {
  [PREV]?: Linked | undefined;
  [NEXT]?: Linked | undefined;
  /** The set that holds it, if any. */
  [IN]?: LinkedSet<object> | undefined;
}

/**
 * A set of objects that come and go thousands of times a second (leases held, deadlines watched),
 * as a doubly linked list through the objects themselves: adding and deleting allocate nothing,
 * and an object that leaves keeps no link to the others.
 *
 * A `Set` of them cost far more than its operations: each time its table grew, or filled with
 * deleted entries, it moved to a new table and left the old one behind, still pointing at what
 * it held then. An old table that had lived long enough to be promoted to V8's old generation
 * kept those objects, and everything they pointed to, alive through every young-generation
 * collection until the next full one, and they were promoted in turn. With 64 acquire+release
 * loops on ioredis 5, young collections took 3-4.5 ms each and promoted megabytes a second;
 * with the manager's leases and the call deadlines in linked sets, 0.8 ms (`node --trace-gc
 * bench/ab.mjs --pass ...`).
 *
 * An object is in at most one LinkedSet at a time: adding it to a second one while the first holds
 * it throws, and `has` and `delete` of a set that does not hold it see it as absent.
 */
export class LinkedSet<T extends object> {
  #head: Linked | undefined = undefined;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds `item` (nothing if it is in already). */
  add(item: T): void {
    const d = item as Linked;
    if (d[IN] === this) return;
    if (d[IN]) throw new Error('LinkedSet.add: the item is in another LinkedSet');
    d[IN] = this;
    d[PREV] = undefined;
    d[NEXT] = this.#head;
    if (this.#head) this.#head[PREV] = d;
    this.#head = d;
    this.#size++;
  }

  has(item: T): boolean {
    return (item as Linked)[IN] === this;
  }

  /** Removes `item`, which keeps no link to the others; false if it was not in. */
  delete(item: T): boolean {
    const d = item as Linked;
    if (d[IN] !== this) return false;
    d[IN] = undefined;
    const prev = d[PREV];
    const next = d[NEXT];
    if (prev) prev[NEXT] = next;
    else this.#head = next;
    if (next) next[PREV] = prev;
    d[PREV] = undefined;
    d[NEXT] = undefined;
    this.#size--;
    return true;
  }

  /** The first item (the one added last), or undefined. */
  first(): T | undefined {
    return this.#head as T | undefined;
  }

  /** The item after `item`, or undefined (also when `item` is not in). */
  next(item: T): T | undefined {
    return (item as Linked)[NEXT] as T | undefined;
  }

  /** A copy of the items, newest first: safe to change the set while going through it. */
  toArray(): T[] {
    const items: T[] = [];
    for (let d = this.#head; d; d = d[NEXT]) items.push(d as T);
    return items;
  }
}
