import type { RedisClient } from './redis-client';

const known = new WeakMap<object, boolean>();

/**
 * Whether `redis` writes to one server it was given (a single or master-slave connection): not a
 * Cluster, no Sentinel. A READONLY reply from such a server is final (it was demoted to a replica, and
 * the connection does not follow the promotion), where a Sentinel or Cluster client answers READONLY
 * only while it is being moved to the new master.
 */
export function writesToFixedServer(redis: RedisClient): boolean {
  let fixed = known.get(redis);
  if (fixed === undefined) {
    const sentinels = (redis as { options?: { sentinels?: unknown[] | null } }).options?.sentinels;
    fixed = !redis.isCluster && !(Array.isArray(sentinels) && sentinels.length > 0);
    known.set(redis, fixed);
  }
  return fixed;
}
