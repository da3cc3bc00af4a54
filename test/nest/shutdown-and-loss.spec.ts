import { Controller, Get, Module, Sse, type INestApplication, type MessageEvent } from '@nestjs/common';
import { interval, map, type Observable } from 'rxjs';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import { CurrentLock, DistributedLock, LockLostError, LockService, RedisLockModule, type ActiveLock } from '../../lib';
import { connect, eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { gate, listen, lockKey, lockOptions, openRequest, untilWaiting, within } from './nest-support';

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

  @Sse('feed/:id')
  @DistributedLock({ key: 'feed:{params.id}' })
  feed(): Observable<MessageEvent> {
    return interval(50).pipe(map((i) => ({ data: { i } })));
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

/** A plain connection and a lock client of another process, shared by the specs below. */
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

describe('app.close() while a request waits for its lock', () => {
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
      await untilWaiting(other, 'slot:1'); // the request is waiting for the lock held elsewhere
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

describe('a lock lost while the handler runs', () => {
  it("the handler's signal aborts with LockLostError, and its release afterwards leaves the next holder's lock alone", async () => {
    state.signals = [];
    state.release = gate();
    // A short watchdog, so that the loss is seen at the next renewal (every third of it).
    const { app, url } = await startApp({ watchdogTimeout: 1_500 });
    try {
      const response = request(url).get('/long/1');
      const done = response.then((res) => res.status);
      await eventually(() => state.signals.length === 1);
      const signal = state.signals[0];
      // An operator deletes the lock; another client takes it.
      await redis.del(lockKey(prefix, 'long:1'));
      const next = await other.locks.getLock('long:1').lock({ owner: 'next-holder', leaseTime: 30_000 });
      await eventually(() => signal.aborted, 10_000);
      expect(signal.reason).toBeInstanceOf(LockLostError);
      state.release.open();
      expect(await done).toBe(200);
      await sleep(300);
      // The next holder still holds it, once.
      const { holders } = await other.locks.inspect('long:1');
      expect(holders).toEqual([expect.objectContaining({ owner: 'next-holder', holdCount: 1 })]);
      await next.release();
      expect(await redis.exists(lockKey(prefix, 'long:1'))).toBe(0);
    } finally {
      state.release.open();
      await app.close();
    }
  });
});

describe('explicit owners through LockService', () => {
  it('two requests passing the same owner re-enter (as docs/locks.md says), and the first to end leaves the other its hold and its signal', async () => {
    const redis = connect();
    const { app } = await startApp();
    try {
      const locks = app.get(LockService);
      const first = gate();
      const signals: AbortSignal[] = [];
      const a = locks.withLock(
        'shared',
        async (lock) => {
          signals.push(lock.signal);
          await first.promise;
        },
        { owner: 'job-7', waitTime: 0 },
      );
      const second = gate();
      const b = locks.withLock(
        'shared',
        async (lock) => {
          signals.push(lock.signal);
          await second.promise;
        },
        { owner: 'job-7', waitTime: 0 },
      );
      await eventually(() => signals.length === 2);
      expect((await locks.inspect('shared')).holders).toEqual([
        expect.objectContaining({ owner: 'job-7', holdCount: 2 }),
      ]);
      first.open();
      await a;
      expect((await locks.inspect('shared')).holders).toEqual([
        expect.objectContaining({ owner: 'job-7', holdCount: 1 }),
      ]);
      await sleep(200);
      expect(signals[1].aborted).toBe(false);
      second.open();
      await b;
      expect(await redis.exists(lockKey(prefix, 'shared'))).toBe(0);
    } finally {
      await app.close();
      await redis.quit();
    }
  });
});

describe('app.close() while an SSE stream holds its lock', () => {
  it('keeps the lock while the stream still emits, and once the client leaves, close ends with the lock gone', async () => {
    const redis = connect();
    const { app, url } = await startApp({ shutdownTimeout: 1_000 });
    const client = openRequest(`${url}/feed/1`);
    try {
      await client.received('data:');
      expect(await redis.exists(lockKey(prefix, 'feed:1'))).toBe(1);
      // Nest closes its HTTP server first, which waits for every open request: the stream's client has to go.
      const closing = app.close().then(() => 'closed');
      await sleep(500);
      expect(await redis.exists(lockKey(prefix, 'feed:1'))).toBe(1); // still emitting, still locked
      client.request.destroy();
      expect(await within(closing, 8_000)).toBe('closed');
      expect(await redis.exists(lockKey(prefix, 'feed:1'))).toBe(0);
    } finally {
      client.request.destroy();
      await app.close();
      await redis.quit();
    }
  });
});
