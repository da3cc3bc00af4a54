import Redis from 'ioredis';
import { ConnectionConfigError } from '../../engine/errors';
import { formatHostPort } from '../addresses';
import { BaseDeployment } from './base-deployment';
import type { HostPort, MasterSlaveConnectionOptions } from '../connection-options';
import { lockConnectionOptions, SUBSCRIBER_OVERRIDES } from '../redis-options';

/**
 * A master with replicas. Locks live on the master only: every lock command and subscription goes
 * there. Replicas are known for the replica-sync check and health reporting.
 */
export class MasterSlaveDeployment extends BaseDeployment<Redis> {
  readonly type = 'master-slave' as const;
  private readonly master: HostPort;

  constructor(options: MasterSlaveConnectionOptions) {
    const client = new Redis({ ...options.master, ...lockConnectionOptions(options) });
    super({ client, subscriber: client.duplicate(SUBSCRIBER_OVERRIDES), replicas: options.replicas });
    this.master = options.master;
  }

  /** Fails fast if the configured master is not a master (a replica would refuse writes, or worse, accept them). */
  protected override async verify(): Promise<void> {
    const [role] = (await this.client.call('ROLE')) as [string, ...unknown[]];
    if (role === 'master') return;
    throw new ConnectionConfigError([
      `master ${formatHostPort(this.master)} reports role "${role}", not "master": point the master option (REDIS_URL) at the current master.`,
    ]);
  }
}
