// The one function of cluster-key-slot that latchkey uses (the package ships no types).
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot of `key` (of its hash tag, when it has one): 0 to 16383. */
  export default function generate(key: string | Buffer): number;
}
