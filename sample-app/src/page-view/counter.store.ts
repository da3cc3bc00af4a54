import { Inject, Injectable } from '@nestjs/common';
import { LockService } from 'nestjs-redis-lock';

export const COUNTER_KEY = 'pview';

/**
 * The page-view counter: a plain Redis string read and written in two steps (GET, then SET), as in
 * the seed, so that without a lock concurrent requests overwrite each other's updates. It lives in
 * the main Redis (the lock module's deployment).
 */
@Injectable()
export class CounterStore {
  constructor(@Inject(LockService) private readonly locks: LockService) {}

  private get redis() {
    return this.locks.client.redis;
  }

  /** GET, then SET value + 1: deliberately not atomic. */
  async increment(): Promise<number> {
    const next = Number((await this.redis.get(COUNTER_KEY)) ?? 0) + 1;
    await this.redis.set(COUNTER_KEY, String(next));
    return next;
  }

  async read(): Promise<number> {
    return Number((await this.redis.get(COUNTER_KEY)) ?? 0);
  }

  async reset(): Promise<void> {
    await this.redis.set(COUNTER_KEY, '0');
  }
}
