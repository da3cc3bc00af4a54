import { monotonicNow } from '../util/clock';
import type { Cluster } from 'ioredis';
import type { RedisClient } from './redis-client';

/** At most one early slot-map refresh per client in this window (each one opens a short-lived connection to one node). */
const REFRESH_EVERY_MS = 100;

const lastRefresh = new WeakMap<Cluster, number>();

/**
 * A Cluster command could not reach its node: its shard may be failing over. Re-read the slot map
 * now (at most every 100 ms per client: a node asked may not know of the promotion yet) instead of at the next periodic refresh, so commands move
 * to the promoted replica within a moment of its promotion rather than up to a refresh interval
 * later. A no-op for a single connection.
 */
export function refreshSlotsSoon(client: RedisClient): void {
  if (!client.isCluster) return;
  const cluster = client as Cluster;
  const now = monotonicNow();
  if (now - (lastRefresh.get(cluster) ?? 0) < REFRESH_EVERY_MS) return;
  lastRefresh.set(cluster, now);
  cluster.refreshSlotsCache(() => undefined);
}
