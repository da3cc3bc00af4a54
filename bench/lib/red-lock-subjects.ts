import Redis from 'ioredis';
import { ExecutionError, Redlock } from '@sesamecare-oss/redlock';
import { silentLogger } from '../../scripts/tooling';
import type { Contender, ContenderId, Release } from './contenders';
import { LockClient, RedLock } from './subject';

/** The RedLock scenario's contenders: ours and `@sesamecare-oss/redlock`, each over the same masters. */
export type RedLockSubjectId = Extract<ContenderId, 'red-lock' | 'redlock-masters'>;
export const RED_LOCK_SUBJECTS: readonly RedLockSubjectId[] = ['red-lock', 'redlock-masters'];

/** A RedLock contender: the scenario's own start-up, so no `ready()`. */
export interface RedLockSubject extends Omit<Contender, 'id' | 'ready'> {
  readonly id: RedLockSubjectId;
}

/** Both libraries' locks run with the same lease. */
export const RED_LOCK_LEASE_MS = 30_000;

/** What a user writes: ioredis clients at their defaults, one per master. */
export const mastersAt = (ports: readonly number[]): Redis[] =>
  ports.map((port) => new Redis({ host: '127.0.0.1', port }));

/**
 * Ours: one LockClient per master (its own pub/sub connection, as by default) and a RedLock over them
 * per name, at its defaults (watchdog lease, renewed while held).
 */
class OurRedLock implements RedLockSubject {
  readonly id = 'red-lock' as const;
  readonly giveUps = 0;
  private readonly clients: LockClient[];
  private readonly locks = new Map<string, RedLock>();

  constructor(masters: Redis[]) {
    this.clients = masters.map((redis) => new LockClient({ redis, keyPrefix: 'bench-rl', logger: silentLogger }));
  }

  async acquire(name: string, signal?: AbortSignal): Promise<Release> {
    let lock = this.locks.get(name);
    if (!lock) this.locks.set(name, (lock = new RedLock(this.clients, name)));
    const handle = await lock.lock({ signal });
    return () => handle.release();
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((client) => client.close()));
  }
}

/** `@sesamecare-oss/redlock` at its defaults; it gives up after retryCount attempts and is asked again. */
class SesameRedlock implements RedLockSubject {
  readonly id = 'redlock-masters' as const;
  giveUps = 0;
  private readonly redlock: Redlock;

  constructor(masters: Redis[]) {
    this.redlock = new Redlock(masters);
    // redlock emits every refused attempt as an 'error' event; without a listener Node would throw.
    this.redlock.on('error', () => undefined);
  }

  async acquire(name: string, signal?: AbortSignal): Promise<Release> {
    for (;;) {
      signal?.throwIfAborted();
      try {
        const lock = await this.redlock.acquire([`bench-rl:${name}`], RED_LOCK_LEASE_MS);
        if (signal?.aborted) {
          await lock.release();
          signal.throwIfAborted();
        }
        return () => lock.release();
      } catch (error) {
        if (!(error instanceof ExecutionError)) throw error;
        this.giveUps++;
      }
    }
  }

  async close(): Promise<void> {
    // The clients are the caller's; Redlock.quit() would close them.
  }
}

export function createRedLockSubject(id: RedLockSubjectId, masters: Redis[]): RedLockSubject {
  return id === 'red-lock' ? new OurRedLock(masters) : new SesameRedlock(masters);
}
