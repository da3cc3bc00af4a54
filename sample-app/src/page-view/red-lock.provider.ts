import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { createLockClient, LockService, lockOptionsFromEnv, type LockClient, type RedLock } from '../../../lib';

/**
 * v4's RedLock over five independent masters, listed in REDLOCK_NODES (host:port,…). The counter
 * itself stays in the main Redis. The clients are created at start-up and closed on shutdown.
 */
@Injectable()
export class RedLockProvider implements OnApplicationShutdown {
  private clients: LockClient[] = [];
  private redLock?: RedLock;

  constructor(@Inject(LockService) private readonly locks: LockService) {}

  async get(): Promise<RedLock> {
    if (!this.redLock) {
      const nodes = (process.env.REDLOCK_NODES ?? '').split(',').filter(Boolean);
      if (nodes.length === 0)
        throw new Error('REDLOCK_NODES is not set: list the independent masters for /v4 (host:port,…).');
      this.clients = await Promise.all(
        nodes.map((node) =>
          createLockClient({ ...lockOptionsFromEnv({ REDIS_URL: `redis://${node}` }), keyPrefix: 'pview-redlock' }),
        ),
      );
      this.redLock = this.locks.redLock('pview', this.clients);
    }
    return this.redLock;
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all(this.clients.map((client) => client.close()));
  }
}
