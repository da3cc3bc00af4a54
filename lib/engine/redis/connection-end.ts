import type { RedisClient } from './redis-client';

/** Connections that are connected again after an 'end' nobody asked for (see `revivedAfterEnd`). */
const revived = new WeakSet<RedisClient>();

/**
 * Says whether `connection` comes back by itself after ioredis ends it. ioredis ends a sentinel
 * connection for good when a connect is cut short (its failover detector fires mid-resolve), and the
 * connection layer revives the connections it owns 50 ms later (connection-revival.ts). Until it closes them,
 * their 'end' is a moment of an outage, which a release or an acceptance must ride through like any
 * other, not a reason to give up and leave the lock to its lease.
 */
export function revivedAfterEnd(connection: RedisClient, revives: boolean): void {
  if (revives) revived.add(connection);
  else revived.delete(connection);
}

/** Ended, and nobody will connect it again: retrying a command on it is pointless. */
export function closedForGood(connection: RedisClient): boolean {
  return connection.status === 'end' && !revived.has(connection);
}
