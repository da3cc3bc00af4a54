import type { RedisClient } from '../redis/redis-client';

const pending = new WeakMap<RedisClient, Promise<void>>();

/**
 * Resolves at the client's next 'ready' (reconnected, or moved to a promoted master), or for a
 * Cluster, which stays ready through a shard's failover, at its next slot-map 'refresh'. One
 * listener per client however many operations wait for it.
 */
export function nextReady(client: RedisClient): Promise<void> {
  let ready = pending.get(client);
  if (!ready) {
    const event = client.isCluster ? 'refresh' : 'ready';
    ready = new Promise<void>((resolve) =>
      client.once(event, () => {
        pending.delete(client);
        resolve();
      }),
    );
    pending.set(client, ready);
  }
  return ready;
}
