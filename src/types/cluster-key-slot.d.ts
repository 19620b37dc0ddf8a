// The one function of cluster-key-slot that latchkey uses (the package ships no types). It is a
// CommonJS module whose export is the function itself.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot of `key` (of its hash tag, when it has one): 0 to 16383. */
  function generate(key: string | Buffer): number;
  export = generate;
}
