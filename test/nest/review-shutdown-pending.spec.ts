import { createHook } from 'node:async_hooks';
import { Controller, Module, Sse, type INestApplication, type MessageEvent } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { from, map, type Observable } from 'rxjs';
import { CurrentLock, DistributedLock, RedisLockModule, type ActiveLock } from '../../lib';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { listen, lockKey, lockOptions, openRequest } from './nest-support';

const prefix = testPrefix();
const signals: AbortSignal[] = [];

@Controller()
class HangController {
  @Sse('hang/:id')
  @DistributedLock({ key: 'hang:{params.id}' })
  hang(@CurrentLock() lock: ActiveLock): Observable<MessageEvent> {
    signals.push(lock.signal);
    // Work that ignores its signal and never settles: the lock stays while the application runs.
    return from(new Promise<string>(() => undefined)).pipe(map((data) => ({ data })));
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 300 }))],
  controllers: [HangController],
})
class AppModule {}

/** The intervals (repeating timers) created from `start()` on that have not been cleared: what would keep a process up. */
function liveIntervals(): { start(): void; stop(): void; count(): number } {
  const live = new Set<number>();
  const hook = createHook({
    init(id, type, _trigger, resource) {
      if (type === 'Timeout' && (resource as { _repeat?: number | null })._repeat) live.add(id);
    },
    destroy(id) {
      live.delete(id);
    },
  });
  return { start: () => hook.enable(), stop: () => hook.disable(), count: () => live.size };
}

/**
 * A call whose caller left keeps its lock while the promises its work started are pending, and says so
 * every 30 s (docs/nest.md, Release follows the work). Once app.close() has given the lock up (its
 * signal aborted, the connections closed), that wait has nothing left to guard: its warning timer must
 * not outlive the application (app.close() leaves no open handle), nor keep warning about a lock it
 * no longer holds.
 */
describe('review: app.close() after a caller left work that never settles', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = connect();
  });
  afterAll(async () => {
    await redis.quit();
  });

  it('leaves no timer behind', async () => {
    const intervals = liveIntervals();
    intervals.start();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app: INestApplication = moduleRef.createNestApplication({ logger: false });
    const url = await listen(app);
    const client = openRequest(`${url}/hang/1`);
    try {
      await eventually(() => signals.length === 1);
      client.request.destroy();
      await eventually(() => signals[0].aborted); // the caller left: cancelled, the lock kept
      expect(await redis.exists(lockKey(prefix, 'hang:1'))).toBe(1);
    } finally {
      client.request.destroy();
      await app.close();
    }
    expect(await redis.exists(lockKey(prefix, 'hang:1'))).toBe(0);
    try {
      await sleep(200);
      expect(intervals.count()).toBe(0);
    } finally {
      intervals.stop();
    }
  });
});
