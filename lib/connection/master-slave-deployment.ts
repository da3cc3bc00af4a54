import Redis from 'ioredis';
import { ConnectionConfigError } from '../engine/errors';
import { RedisPubSub } from '../engine/pubsub';
import type { HostPort, MasterSlaveConnectionOptions } from './connection-options';
import { connectAll, quitAll } from './lifecycle';
import type { RedisDeployment } from './redis-deployment';
import { lockConnectionOptions, SUBSCRIBER_OVERRIDES } from './redis-options';

/**
 * A master with replicas. Locks live on the master only: every lock command and subscription goes
 * there. Replicas are known for the replica-sync check and health reporting.
 */
export class MasterSlaveDeployment implements RedisDeployment {
  readonly type = 'master-slave' as const;
  readonly client: Redis;
  readonly pubsub: RedisPubSub;
  readonly publishCommand = 'publish' as const;
  readonly replicas: readonly HostPort[];
  private readonly subscriber: Redis;

  constructor(private readonly options: MasterSlaveConnectionOptions) {
    this.client = new Redis({ ...options.master, ...lockConnectionOptions(options) });
    this.subscriber = this.client.duplicate(SUBSCRIBER_OVERRIDES);
    this.pubsub = new RedisPubSub(this.subscriber, false, false);
    this.replicas = options.replicas;
  }

  /** Fails fast if the configured master is not a master (a replica would refuse writes, or worse, accept them). */
  async ready(): Promise<void> {
    await connectAll([this.client, this.subscriber]);
    const [role] = (await this.client.call('ROLE')) as [string, ...unknown[]];
    if (role !== 'master') {
      const { host, port } = this.options.master;
      await this.close();
      throw new ConnectionConfigError([
        `master ${host}:${port} reports role "${role}", not "master": point the master option (REDIS_URL) at the current master.`,
      ]);
    }
  }

  close(): Promise<void> {
    return quitAll([this.client, this.subscriber]);
  }
}
