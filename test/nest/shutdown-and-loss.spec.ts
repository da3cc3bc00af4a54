import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import { CurrentLock, DistributedLock, RedisLockModule, type ActiveLock } from '../../lib';
import { connect, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { gate, listen, lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();

const state = {
  runs: 0,
  signals: [] as AbortSignal[],
  release: gate(),
};

@Controller()
class SlotController {
  @Get('slot/:id')
  @DistributedLock({ key: 'slot:{params.id}' }) // no waitTime: waits until the lock is free
  slot(): string {
    state.runs++;
    return 'ran';
  }

  @Get('long/:id')
  @DistributedLock({ key: 'long:{params.id}' })
  async long(@CurrentLock() lock: ActiveLock): Promise<string> {
    state.signals.push(lock.signal);
    await state.release.promise;
    return 'done';
  }
}

@Module({ controllers: [SlotController] })
class SlotModule {}

async function startApp(
  extra: Parameters<typeof lockOptions>[1] = {},
): Promise<{ app: INestApplication; url: string }> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot(lockOptions(prefix, extra)), SlotModule],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  return { app, url: await listen(app) };
}

/** `promise`, or 'timed out' after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), ms))),
  ]).finally(() => clearTimeout(timer));
}

describe('app.close() while a request waits for its lock', () => {
  let redis: Redis;
  let other: TestClient;

  beforeAll(() => {
    redis = connect();
    other = lockClient({ keyPrefix: prefix });
  });

  afterAll(async () => {
    await other.close();
    await redis.quit();
  });

  beforeEach(() => {
    state.runs = 0;
    state.signals = [];
    state.release = gate();
  });

  it('ends in bounded time: the waiting request gets 503 without running, and the app leaves no lock behind', async () => {
    const { app, url } = await startApp({ shutdownTimeout: 1_000 });
    const held = await other.locks.getLock('slot:1').lock({ owner: 'elsewhere' });
    try {
      const response = request(url)
        .get('/slot/1')
        .then(
          (res) => res.status,
          (error: Error) => error.message,
        );
      await sleep(500); // the request is waiting for the lock held elsewhere
      expect(state.runs).toBe(0);
      const closed = await within(
        app.close().then(() => 'closed'),
        8_000,
      );
      expect(closed).toBe('closed');
      expect(await within(response, 5_000)).toBe(503);
      expect(state.runs).toBe(0);
    } finally {
      await held.release();
      await app.close();
    }
    expect(await redis.exists(lockKey(prefix, 'slot:1'))).toBe(0);
  });
});
