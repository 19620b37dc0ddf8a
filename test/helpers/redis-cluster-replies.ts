/**
 * What the test Redis Cluster (redis-cluster.ts) reads of two replies: CLUSTER NODES, parsed
 * into one line per node, and the shape of CLUSTER SLOTS.
 */
import type { ClusterNodeRole } from './redis-cluster-node.js';

export interface NodeLine {
  readonly id: string;
  readonly port: number;
  readonly role: ClusterNodeRole;
  readonly masterId: string | undefined;
  readonly servesSlots: boolean;
}

export function parseClusterNodes(text: string): NodeLine[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '-', , , , , ...slots] = line.split(' ');
      const port = Number(address.split('@')[0]?.split(':').pop());
      const flagList = flags.split(',');
      return {
        id,
        port,
        role: flagList.includes('master') ? 'master' : 'replica',
        masterId: masterId === '-' ? undefined : masterId,
        servesSlots: slots.some((range) => /^\d/.test(range)),
      } satisfies NodeLine;
    });
}

/** CLUSTER SLOTS: [[start, end, [host, port, id, ...], ...replicas], ...] */
export type SlotsReply = Array<[number, number, [string, number, string, ...unknown[]], ...unknown[]]>;
