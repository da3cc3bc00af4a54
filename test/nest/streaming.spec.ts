import * as http from 'node:http';
import { Controller, Get, HttpException, Module, Sse, type INestApplication, type MessageEvent } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { interval, map, take, throwError, timer, toArray, finalize, mergeMap, type Observable } from 'rxjs';
import request from 'supertest';
import { DistributedLock, LockService, RedisLockModule } from '../../lib';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { gate, listen, lockKey, lockOptions, openRequest } from './nest-support';

const prefix = testPrefix();

const state = {
  teardowns: 0,
  handlerRuns: 0,
  setupGate: gate(),
  setupDone: false,
};

@Controller()
class StreamController {
  @Get('batch/:id')
  @DistributedLock({ key: 'batch:{params.id}' })
  batch(): Observable<number[]> {
    return interval(100).pipe(take(6), toArray());
  }

  @Get('endless/:id')
  @DistributedLock({ key: 'endless:{params.id}' })
  endless(): Observable<number[]> {
    return interval(50).pipe(
      take(10_000),
      toArray(),
      finalize(() => state.teardowns++),
    );
  }

  @Sse('events/:id')
  @DistributedLock({ key: 'events:{params.id}' })
  events(): Observable<MessageEvent> {
    return interval(50).pipe(
      map((i) => ({ data: { i } })),
      finalize(() => state.teardowns++),
    );
  }

  @Sse('setup/:id')
  @DistributedLock({ key: 'setup:{params.id}' })
  async setup(): Promise<Observable<MessageEvent>> {
    await state.setupGate.promise;
    state.setupDone = true;
    return interval(50).pipe(map((i) => ({ data: { i } })));
  }

  @Get('failing/:id')
  @DistributedLock({ key: 'failing:{params.id}' })
  failing(): Observable<never> {
    return timer(100).pipe(mergeMap(() => throwError(() => new HttpException('stream failed', 418))));
  }

  @Get('counted/:id')
  @DistributedLock({ key: 'counted:{params.id}' })
  counted() {
    state.handlerRuns++;
    return 'ran';
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix))],
  controllers: [StreamController],
})
class AppModule {}

const clients: http.ClientRequest[] = [];

/** Opens a raw HTTP request, so the test can destroy its socket (each is destroyed after its test). */
function open(url: string): ReturnType<typeof openRequest> {
  const opened = openRequest(url);
  clients.push(opened.request);
  return opened;
}

describe('@DistributedLock on streaming handlers', () => {
  let app: INestApplication;
  let url: string;
  let redis: Redis;
  let locks: LockService;

  const exists = async (name: string) => (await redis.exists(lockKey(prefix, name))) === 1;

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    url = await listen(app);
    locks = app.get(LockService);
  });

  afterEach(() => clients.splice(0).forEach((client) => client.destroy()));

  afterAll(async () => {
    await app?.close();
    await redis.quit();
  });

  beforeEach(() => {
    state.teardowns = 0;
    state.handlerRuns = 0;
    state.setupGate = gate();
    state.setupDone = false;
  });

  it('keeps the lock while an Observable result emits and releases it before the response ends', async () => {
    const response = request(app.getHttpServer())
      .get('/batch/1')
      .then((r) => r);
    await eventually(() => exists('batch:1'));
    await sleep(150);
    expect(await exists('batch:1')).toBe(true); // still streaming (6 × 100 ms)
    const done = await response;
    expect(done.status).toBe(200);
    expect(done.body).toEqual([0, 1, 2, 3, 4, 5]);
    expect(await exists('batch:1')).toBe(false); // released before the response was sent
  });

  it('releases an SSE stream lock when the client disconnects mid-stream, tearing the stream down', async () => {
    const client = open(`${url}/events/1`);
    await client.received('data:');
    expect(await exists('events:1')).toBe(true);
    client.request.destroy();
    await eventually(async () => !(await exists('events:1')), 5_000);
    expect(state.teardowns).toBe(1);
  });

  it('releases the lock of a plain Observable route when the client destroys the socket', async () => {
    const client = open(`${url}/endless/1`);
    await eventually(() => exists('endless:1'));
    await sleep(100);
    client.request.destroy();
    await eventually(async () => !(await exists('endless:1')), 5_000);
    expect(state.teardowns).toBe(1);
  });

  it("keeps the lock until an async handler's promise settles, even if the client left before", async () => {
    const client = open(`${url}/setup/1`);
    await eventually(() => exists('setup:1'));
    client.request.destroy();
    await sleep(300);
    // The handler is still setting up: its work is not stopped by the unsubscription, so neither is the lock.
    expect(state.setupDone).toBe(false);
    expect(await exists('setup:1')).toBe(true);
    state.setupGate.open();
    await eventually(async () => !(await exists('setup:1')), 5_000);
    expect(state.setupDone).toBe(true);
  });

  it("passes a stream's error through unchanged and releases the lock", async () => {
    const response = await request(app.getHttpServer()).get('/failing/1').expect(418);
    expect(response.body).toEqual({ statusCode: 418, message: 'stream failed' });
    expect(await exists('failing:1')).toBe(false);
  });

  it('stops waiting when the client disconnects before getting the lock: the handler never runs', async () => {
    const held = await locks.lock('counted:1', { leaseTime: 10_000 });
    const client = open(`${url}/counted/1`);
    await sleep(200); // waiting for the lock now
    client.request.destroy();
    await sleep(100);
    await held.release();
    await sleep(200);
    expect(state.handlerRuns).toBe(0);
    expect(await exists('counted:1')).toBe(false);
    await request(app.getHttpServer()).get('/counted/1').expect(200, 'ran');
    expect(state.handlerRuns).toBe(1);
  });
});
