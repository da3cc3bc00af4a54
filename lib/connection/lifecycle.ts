import type { Cluster, Redis } from 'ioredis';

/**
 * Connects lazily created connections (no-op for ones already connecting or ready). Connection
 * errors surface as rejected commands and RedisUnavailableError; the listener only keeps ioredis
 * from printing each reconnect failure as an "Unhandled error event".
 */
export async function connectAll(connections: (Redis | Cluster)[]): Promise<void> {
  for (const c of connections) if (c.listenerCount('error') === 0) c.on('error', () => undefined);
  await Promise.all(connections.map((c) => (c.status === 'wait' ? c.connect() : undefined)));
}

/** Closes connections politely (QUIT), then makes sure nothing of theirs stays open. */
export async function quitAll(connections: (Redis | Cluster)[]): Promise<void> {
  await Promise.all(
    connections.map(async (c) => {
      // QUIT only a live connection (on a reconnecting one it could wait for a dead server forever).
      if (c.status === 'ready') await c.quit().catch(() => undefined);
      // QUIT leaves side connections open (a sentinel client's failover detector): close those too.
      c.disconnect();
    }),
  );
}
