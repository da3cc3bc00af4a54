import Redis from 'ioredis';
import { RedisPubSub } from '../engine/pubsub';
import type { HostPort, SentinelConnectionOptions } from './connection-options';
import { connectAll, quitAll } from './lifecycle';
import type { RedisDeployment } from './redis-deployment';
import { lockConnectionOptions, SUBSCRIBER_OVERRIDES } from './redis-options';

/**
 * A sentinel-managed master. Both connections ask the sentinels for the master, and watch the
 * sentinels' `+switch-master` (ioredis `failoverDetector`), so after a failover commands and
 * subscriptions move to the promoted replica at once, even when the old master is frozen rather
 * than gone; the waiters then retry (reconnect = wake everyone).
 */
export class SentinelDeployment implements RedisDeployment {
  readonly type = 'sentinel' as const;
  readonly client: Redis;
  readonly pubsub: RedisPubSub;
  readonly publishCommand = 'publish' as const;
  readonly replicas: readonly HostPort[] = [];
  private readonly subscriber: Redis;

  constructor(options: SentinelConnectionOptions) {
    const connection = {
      ...lockConnectionOptions(options),
      sentinels: options.sentinels,
      name: options.masterName,
      sentinelUsername: options.sentinelUsername,
      sentinelPassword: options.sentinelPassword,
      failoverDetector: true,
      sentinelCommandTimeout: options.commandTimeout ?? 2_000,
      // Fresh sentinel answers on every reconnect, so a demoted master is not reused.
      sentinelMaxConnections: 3,
    };
    this.client = new Redis(connection);
    this.subscriber = new Redis({ ...connection, ...SUBSCRIBER_OVERRIDES });
    this.pubsub = new RedisPubSub(this.subscriber, false, false);
  }

  ready(): Promise<void> {
    return connectAll([this.client, this.subscriber]);
  }

  close(): Promise<void> {
    return quitAll([this.client, this.subscriber]);
  }
}
