import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { createLockClient, LockService, type LockClient, type RedLock } from 'nestjs-redis-lock';

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
    const masters = redLockNodes(process.env.REDLOCK_NODES ?? '');
    const clients = await Promise.all(
      masters.map(({ host, port }) =>
        createLockClient({ connection: { type: 'single', host, port }, keyPrefix: 'pview-redlock' }),
      ),
    );
    return { redLock: this.locks.redLock('pview', clients), clients };
  }
}

/** `host:port,host:port` (an IPv6 host in brackets) as addresses; throws when empty or malformed. */
function redLockNodes(raw: string): { host: string; port: number }[] {
  const entries = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
  if (entries.length === 0) throw new Error('REDLOCK_NODES is unset: list the masters as host:port,host:port');
  return entries.map((entry) => {
    const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(entry);
    if (!match) throw new Error(`REDLOCK_NODES: "${entry}" is not host:port`);
    return { host: match[1], port: Number(match[2]) };
  });
}
