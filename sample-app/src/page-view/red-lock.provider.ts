import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { createLockClient, LockService, parseHostPorts, type LockClient, type RedLock } from 'nestjs-redis-lock';

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
    // Throws ConnectionConfigError when it is unset or names something that is not host:port.
    const masters = parseHostPorts('REDLOCK_NODES', process.env.REDLOCK_NODES ?? '');
    const clients = await Promise.all(
      masters.map(({ host, port }) =>
        createLockClient({ connection: { type: 'single', host, port }, keyPrefix: 'pview-redlock' }),
      ),
    );
    return { redLock: this.locks.redLock('pview', clients), clients };
  }
}
