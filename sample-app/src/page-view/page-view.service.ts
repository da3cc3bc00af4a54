import { Inject, Injectable } from '@nestjs/common';
import { LockService } from 'nestjs-redis-lock';
import { CounterStore, COUNTER_KEY } from './counter.store';
import { InProcessMutex } from './in-process-mutex';
import { RedLockProvider } from './red-lock.provider';

/** The five ways of counting a page view, from the seed's experiment (v3 and v5 lock in the controller). */
@Injectable()
export class PageViewService {
  private readonly mutex = new InProcessMutex();

  constructor(
    @Inject(CounterStore) private readonly counter: CounterStore,
    @Inject(LockService) private readonly locks: LockService,
    @Inject(RedLockProvider) private readonly redLocks: RedLockProvider,
  ) {}

  /** v1, and the body of v3 / v5: no lock of its own. */
  countUnlocked(): Promise<number> {
    return this.counter.increment();
  }

  /** v2: only requests in this process are serialised. */
  countInProcess(): Promise<number> {
    return this.mutex.run(() => this.counter.increment());
  }

  /** v4: RedLock over five independent masters. */
  async countWithRedLock(): Promise<number> {
    const redLock = await this.redLocks.get();
    return redLock.withLock(() => this.counter.increment(), { leaseTime: 5_000 });
  }

  read(): Promise<number> {
    return this.counter.read();
  }

  /**
   * LockService by hand: the reset takes the same lock as v3, so it never lands between another
   * request's GET and SET.
   */
  reset(): Promise<void> {
    return this.locks.withLock(COUNTER_KEY, () => this.counter.reset(), { waitTime: 5_000 });
  }
}
