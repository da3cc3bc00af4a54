import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { DistributedLock, RedisLockModule } from '../../lib';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

/**
 * @DistributedLock on a provider method (a job, a consumer, a service): its lock follows the work as a
 * handler's does. Promises the method started still running when its result settles keep the lock (and
 * their signal aborts), and an async iterator it returns keeps the lock until it has been read to the end.
 */
const prefix = testPrefix();
const seen = { inside: 0, most: 0, lockedAtEvent: [] as boolean[] };
let redis: Redis;

async function step(ms: number): Promise<void> {
  seen.most = Math.max(seen.most, ++seen.inside);
  await sleep(ms);
  seen.inside--;
}

@Injectable()
class Jobs {
  /** The step loses a Promise.race: the method's Promise settles while the step still runs. */
  @DistributedLock({ key: 'race-job:{0}', waitTime: 10_000 })
  async raced(id: string): Promise<string> {
    await Promise.race([step(600), sleep(50)]);
    return id;
  }

  /** A provider method returning an async iterator (a subscription source called as a service). */
  @DistributedLock({ key: 'iter-job:{0}', waitTime: 10_000 })
  events(id: string): AsyncIterableIterator<number> {
    async function* gen(): AsyncGenerator<number> {
      for (let i = 0; i < 3; i++) {
        await sleep(100);
        seen.lockedAtEvent.push((await redis.exists(lockKey(prefix, `iter-job:${id}`))) === 1);
        yield i;
      }
    }
    return gen();
  }
}

@Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))], providers: [Jobs] })
class AppModule {}

describe('provider methods whose work outlives their result', () => {
  let app: INestApplication;
  beforeAll(async () => {
    redis = connect();
    app = (await Test.createTestingModule({ imports: [AppModule] }).compile()).createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(async () => {
    await app.close();
    await redis.quit();
  });

  it('a provider method whose Promise.race left a step running: a second call does not run beside it', async () => {
    seen.most = 0;
    const jobs = app.get(Jobs);
    await Promise.all([jobs.raced('1'), jobs.raced('1')]);
    await eventually(() => seen.inside === 0);
    expect(seen.most).toBe(1);
  });

  it('a provider method returning an async iterator: the lock is held while it is read', async () => {
    seen.lockedAtEvent = [];
    const jobs = app.get(Jobs);
    // Called as a method, it answers a Promise of the iterator (the lock taken first).
    const it = await (jobs.events('1') as unknown as Promise<AsyncIterableIterator<number>>);
    const values: number[] = [];
    for await (const v of it) values.push(v);
    expect(values).toEqual([0, 1, 2]);
    expect(seen.lockedAtEvent).toEqual([true, true, true]);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'iter-job:1'))) === 0, 5_000);
  });
});
