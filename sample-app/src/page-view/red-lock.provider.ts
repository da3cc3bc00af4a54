import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { createLockClient, LockService, lockOptionsFromEnv, type LockClient, type RedLock } from '../../../lib';

/**
 * v4's RedLock over five independent masters, listed in REDLOCK_NODES (host:port,…). The counter
 * itself stays in the main Redis. The clients are created once, on first use (concurrent first
 * requests share that one creation), and closed on shutdown.
 */
@Injectable()
export class RedLockProvider implements OnApplicationShutdown {
  private redLock?: Promise<{ redLock: RedLock; clients: LockClient[] }>;

  constructor(@Inject(LockService) private readonly locks: LockService) {}

  async get(): Promise<RedLock> {
    if (!this.redLock) {
      this.redLock = this.create();
      this.redLock.catch(() => (this.redLock = undefined)); // a failed start is retried by the next request
    }
    return (await this.redLock).redLock;
  }

  async onApplicationShutdown(): Promise<void> {
    const created = await this.redLock?.catch(() => undefined);
    await Promise.all(created?.clients.map((client) => client.close()) ?? []);
  }

  private async create(): Promise<{ redLock: RedLock; clients: LockClient[] }> {
    const nodes = (process.env.REDLOCK_NODES ?? '').split(',').filter(Boolean);
    if (nodes.length === 0)
      throw new Error('REDLOCK_NODES is not set: list the independent masters for /v4 (host:port,…).');
    const clients = await Promise.all(
      nodes.map((node) =>
        createLockClient({ ...lockOptionsFromEnv({ REDIS_URL: `redis://${node}` }), keyPrefix: 'pview-redlock' }),
      ),
    );
    return { redLock: this.locks.redLock('pview', clients), clients };
  }
}
