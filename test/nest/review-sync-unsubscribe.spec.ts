import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { firstValueFrom, interval, Observable, startWith, tap } from 'rxjs';
import { DistributedLock, RedisLockModule } from '../../lib';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();
let ticks = 0;

@Injectable()
class Feed {
  /** Emits at once, then every 20 ms: each value is work done under the lock. */
  @DistributedLock({ key: 'feed:{0}' })
  ticks(_id: string): Observable<number> {
    return interval(20).pipe(
      startWith(-1),
      tap(() => ticks++),
    );
  }
}

@Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))], providers: [Feed] })
class AppModule {}

/**
 * A caller that unsubscribes while the work's first value is being emitted (firstValueFrom, take(1)
 * on a value emitted at subscription) tears the call down before the work's subscription has been
 * returned. That subscription was then never unsubscribed: the lock was released (nothing pending)
 * while the work kept running, unlocked, for ever.
 */
describe('review: a decorated Observable left during its first, synchronous value', () => {
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(async () => {
    await app.close();
    await redis.quit();
  });

  it('firstValueFrom: the work stops, then the lock is released', async () => {
    ticks = 0;
    expect(await firstValueFrom(app.get(Feed).ticks('1'))).toBe(-1);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'feed:1'))) === 0);
    const after = ticks;
    await sleep(200);
    expect(ticks).toBe(after); // no tick runs without the lock
  });
});
