/** A Lua script compiled into the package at build time (see scripts/build-lua.mjs). */
export interface LuaScript {
  /** The script's name, from its file name (`release.lua` → `release`). */
  readonly name: string;
  /** How many `KEYS[i]` its contract header declares. */
  readonly numberOfKeys: number;
  /**
   * For a script on several items (locks): how many keys each item brings (`KEYS[2i-1]`,
   * `KEYS[2i]` in the header), after the fixed `numberOfKeys`. A call then passes at least one item.
   */
  readonly keysPerItem?: number;
  /**
   * For a script on several items: how many arguments each item brings after the fixed
   * `numberOfArgs` (`ARGV[i+1]` in the header, after one fixed argument; `ARGV[n+i+1]` for a
   * second argument of each of n items). A call then passes exactly that many per item.
   */
  readonly argsPerItem?: number;
  /** How many `ARGV[i]` its contract header declares. */
  readonly numberOfArgs: number;
  /** How many of the declared keys, the last ones, a call may leave out (`KEYS[i]?` in the header). */
  readonly optionalKeys?: number;
  /** How many of the declared arguments, the last ones, a call may leave out (`ARGV[i]?` in the header). */
  readonly optionalArgs?: number;
  /** SHA-1 of the source, for EVALSHA. */
  readonly sha: string;
  readonly source: string;
}
