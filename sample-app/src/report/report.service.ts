import { Inject, Injectable } from '@nestjs/common';
import { DistributedLock, LockService } from 'nestjs-redis-lock';
import { CounterStore } from '../page-view/counter.store';

export const REPORT_KEY = 'pview:report';

/**
 * The decorator on a plain provider method (not a route handler): whichever instance gets the lock
 * writes the report; with `waitTime: 0` the others do not wait for it.
 */
@Injectable()
export class ReportService {
  constructor(
    @Inject(CounterStore) private readonly counter: CounterStore,
    @Inject(LockService) private readonly locks: LockService,
  ) {}

  @DistributedLock({ key: REPORT_KEY, waitTime: 0, leaseTime: 5_000 })
  async publish(second: number): Promise<void> {
    const redis = this.locks.client.redis;
    await redis.hset(REPORT_KEY, {
      count: String(await this.counter.read()),
      second: String(second),
      pid: String(process.pid),
    });
    // One run per tick across all instances: the demo and tests can check this count.
    const runs = `${REPORT_KEY}:runs:${second}`;
    await redis.incr(runs);
    await redis.expire(runs, 60);
    // Hold the lock for the rest of this second: an instance whose tick fires a few ms later finds it taken.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, (second + 1) * 1000 - Date.now() - 50)));
  }
}
