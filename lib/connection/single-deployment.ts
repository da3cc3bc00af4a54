import Redis from 'ioredis';
import { RedisPubSub } from '../engine/pubsub';
import type { HostPort, SingleConnectionOptions } from './connection-options';
import { connectAll, quitAll } from './lifecycle';
import type { RedisDeployment } from './redis-deployment';
import { lockConnectionOptions, SUBSCRIBER_OVERRIDES } from './redis-options';

/** One server: a command connection and its subscriber duplicate. */
export class SingleDeployment implements RedisDeployment {
  readonly type = 'single' as const;
  readonly client: Redis;
  readonly pubsub: RedisPubSub;
  readonly publishCommand = 'publish' as const;
  readonly replicas: readonly HostPort[] = [];
  private readonly subscriber: Redis;

  constructor(options: SingleConnectionOptions) {
    const redisOptions = lockConnectionOptions(options);
    this.client = options.url
      ? new Redis(options.url, redisOptions)
      : new Redis({ host: options.host ?? '127.0.0.1', port: options.port ?? 6379, ...redisOptions });
    this.subscriber = this.client.duplicate(SUBSCRIBER_OVERRIDES);
    this.pubsub = new RedisPubSub(this.subscriber, false, false);
  }

  ready(): Promise<void> {
    return connectAll([this.client, this.subscriber]);
  }

  close(): Promise<void> {
    return quitAll([this.client, this.subscriber]);
  }
}
