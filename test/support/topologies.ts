/** How tests reach the Redis topologies that test/global-setup.ts started. */
import { randomBytes } from 'node:crypto';
import {
  readTopology,
  RunningTopology,
  stateDirFor,
  TEST_BASE_PORTS,
  TOPOLOGY_KINDS,
  TopologyKind,
} from '../../scripts/redis-topology';

/** Where global setup persists the shared topologies (one topology.json each). */
export const SHARED_STATE_DIRS: string[] = TOPOLOGY_KINDS.map((kind) => stateDirFor(kind, TEST_BASE_PORTS[kind]));

/**
 * The shared topology of this kind (read from its topology.json). Every test file shares it, so
 * never stop, kill or reconfigure its nodes: destructive tests start a private topology instead,
 * startTopology(kind, { basePort }) with their own basePort in 7200-7390 (see scripts/redis-topology.ts).
 */
export function sharedTopology(kind: TopologyKind): RunningTopology {
  return readTopology(stateDirFor(kind, TEST_BASE_PORTS[kind]));
}

/** A random key name, so tests sharing a topology never see each other's data. */
export function uniqueKey(prefix = 'test'): string {
  return `${prefix}:${randomBytes(8).toString('hex')}`;
}
