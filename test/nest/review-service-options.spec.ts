import type { INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { LockOptionsError, type LockService } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { lockServiceApp } from './nest-support';

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
    ({ app, locks } = await lockServiceApp(prefix));
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
