import { Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { LockOptionsError, LockService, RedisLockModule } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { lockOptions } from './nest-support';

const prefix = testPrefix();

/**
 * LockService takes the options the decorator takes, and refuses the same contradictions before any
 * Redis call: `@DistributedLock({ permits, mode })` fails at start-up, while LockService.withLock
 * dropped `mode` and took a permit, so two "writers" of a semaphore of 2 ran together.
 */
describe('review: LockService refuses contradictory lock options', () => {
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    @Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    locks = app.get(LockService);
    redis = connect();
  });
  afterAll(async () => {
    await app.close();
    await redis.quit();
  });

  it.each(['read', 'write'] as const)(
    'permits with mode %s: a LockOptionsError, nothing run, nothing locked',
    async (mode) => {
      let ran = 0;
      const call = () => locks.withLock('permit-and-mode', () => void ran++, { permits: 2, mode });
      const outcomes = await Promise.allSettled([call(), call()]);
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('rejected');
        expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(LockOptionsError);
      }
      expect(ran).toBe(0);
      expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    },
  );
});
