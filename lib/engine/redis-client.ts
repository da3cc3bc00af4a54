import type { Cluster, Redis } from 'ioredis';

/** What the engine runs commands on: a standalone/sentinel ioredis client or an ioredis Cluster. */
export type RedisClient = Redis | Cluster;

/** The command that notifies unlock channels: classic pub/sub, or sharded pub/sub on a Cluster. */
export type PublishCommand = 'publish' | 'spublish';
