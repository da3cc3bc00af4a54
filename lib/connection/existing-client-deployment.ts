import type { Cluster, Redis } from 'ioredis';
import { subscriberFor } from '../engine/lock-client';
import { RedisPubSub } from '../engine/pubsub';
import type { ExistingClientOptions, HostPort } from './connection-options';
import { quitAll } from './lifecycle';
import type { RedisDeployment } from './redis-deployment';

/** A client the user made. We never close it; a subscriber we duplicated from it is ours. */
export class ExistingClientDeployment implements RedisDeployment {
  readonly type = 'client' as const;
  readonly client: Redis | Cluster;
  readonly pubsub: RedisPubSub;
  readonly publishCommand: 'publish' | 'spublish';
  readonly replicas: readonly HostPort[] = [];
  private readonly ownedSubscriber?: Redis | Cluster;

  constructor(options: ExistingClientOptions) {
    this.client = options.client;
    this.publishCommand = options.client.isCluster ? 'spublish' : 'publish';
    if (!options.subscriber) this.ownedSubscriber = subscriberFor(options.client);
    this.pubsub = new RedisPubSub(options.subscriber ?? this.ownedSubscriber!, options.client.isCluster, false);
  }

  async ready(): Promise<void> {}

  close(): Promise<void> {
    return this.ownedSubscriber ? quitAll([this.ownedSubscriber]) : Promise.resolve();
  }
}
