import type { Cluster, Redis } from 'ioredis';

/** What the engine runs commands on: a standalone/sentinel ioredis client or an ioredis Cluster. */
export type RedisClient = Redis | Cluster;

/** The command that notifies unlock channels: classic pub/sub, or sharded pub/sub on a Cluster. */
export type PublishCommand = 'publish' | 'spublish';

/**
 * The ioredis `keyPrefix` of a client ('' without one). ioredis puts it before every key a command
 * names (so before a script's KEYS, and a script's channel names derive from those), but not before
 * the channels of SUBSCRIBE, nor before the channel a message reports: pub/sub and slot arithmetic
 * must add it themselves.
 */
export function ioredisKeyPrefix(client: RedisClient): string {
  const prefix: unknown = client.options.keyPrefix;
  return prefix === undefined || prefix === null ? '' : String(prefix);
}
