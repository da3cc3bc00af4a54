import { leaseEnd, monotonicNow } from '../util/clock';
import { leaseFromAnchor, type LeaseFrom, type ServerClockAnchor } from '../util/server-clock';
import { sameConnection, type ConnectionMark } from '../redis/connection-mark';
import type { RedisClient } from '../redis/redis-client';

/** A refused attempt's reply that read Redis's clock, and the connection it came on. */
export interface WaitAnchor extends ServerClockAnchor {
  readonly connection: ConnectionMark;
}

/**
 * The first lease a grant told in a message (made at Redis time `grantMs` with lease `leaseMs`) may be
 * believed for, from the anchor of the wait that gives the latest end among those that can vouch for
 * it: taken no later than the grant, on a connection to `key`'s server still open now (after a
 * reconnect the master may have changed, and the message may come from an old one whose hand-over the
 * new master never had) and no newer than the subscriber socket the message came on (`heardSince`,
 * when it became ready: a subscriber that connected before the command connection's last reconnect
 * may still be on the old master, alive behind a partition, while the anchor came from the new one;
 * unknown, as a Cluster's: none can), and agreeing with this process's clock (no more server time between the
 * anchor and the grant than local time since the anchor was sent, give or take Redis's millisecond and
 * the drift share). Undefined when none can, or when less than half of the lease is left (a late
 * message: its renewal would be due at once, and a call of the waiter's own also says whether the hold
 * is still there): the waiter then asks Redis instead.
 */
export function handOverFirstLease(
  anchors: readonly (WaitAnchor | undefined)[],
  grantMs: number,
  leaseMs: number,
  driftFactor: number,
  redis: RedisClient,
  key: string,
  heardSince: number | undefined,
): LeaseFrom | undefined {
  const now = monotonicNow();
  let best: LeaseFrom | undefined;
  let bestEnd = -Infinity;
  for (const anchor of anchors) {
    if (!anchor || !sameConnection(anchor.connection, redis, key)) continue;
    const since = anchor.connection.since;
    if (heardSince === undefined || since === undefined || heardSince < since) continue;
    if (grantMs - anchor.serverMs > (now - anchor.sentAt) * (1 + driftFactor) + 1) continue;
    const lease = leaseFromAnchor(anchor, grantMs, leaseMs);
    if (!lease) continue;
    const end = leaseEnd(lease.sentAt, lease.leaseMs, driftFactor);
    if (end > bestEnd) [best, bestEnd] = [lease, end];
  }
  return bestEnd - now >= leaseMs / 2 ? best : undefined;
}
