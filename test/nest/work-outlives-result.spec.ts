/**
 * A handler's result that ends (errors or completes) while work it started still runs: a timeout on a
 * slow step (`from(this.step()).pipe(timeout(…))`), `race(from(step()), timer(…))`, a `forkJoin` whose
 * other branch fails first, `Promise.race([step(), sleep(…)])`. The caller gets the result at once; the
 * step's signal aborts with LockCallEndedError, and the lock stays until the step has stopped.
 */
import { Controller, Get, Injectable, Module, Param, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { forkJoin, from, map, Observable, race, timeout, timer } from 'rxjs';
import request from 'supertest';
import { DistributedLock, LockCallEndedError, LockService, RedisLockModule } from '../../lib';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();

/** Long next to the 150 ms after which the results below end: the step is sure to outlive them. */
const STEP_MS = 1_500;

/** Slow steps: whether they overlapped, and what each saw as it ended (lock in Redis, its signal). */
class Steps {
  active = 0;
  most = 0;
  ended: { locked: boolean; aborted: boolean; reason: unknown }[] = [];

  async run(name: string, signal: AbortSignal, ms = STEP_MS): Promise<string> {
    this.most = Math.max(this.most, ++this.active);
    // A step that stops on its signal, as work should.
    await new Promise<void>((resolve) => {
      const done = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => (clearTimeout(done), resolve()), { once: true });
      if (signal.aborted) resolve();
    });
    await this.finish(name, signal);
    return 'done';
  }

  /** A step that ignores its signal and runs its full time. */
  async runDeaf(name: string, signal: AbortSignal): Promise<string> {
    this.most = Math.max(this.most, ++this.active);
    await sleep(STEP_MS);
    await this.finish(name, signal);
    return 'done';
  }

  private async finish(name: string, signal: AbortSignal): Promise<void> {
    this.ended.push({
      locked: (await redis.exists(lockKey(prefix, name))) === 1,
      aborted: signal.aborted,
      reason: signal.reason,
    });
    this.active--;
  }
}

let steps = new Steps();
let redis: Redis;
/** The signals of the calls whose work ends with their result. */
const signals: AbortSignal[] = [];

@Controller()
class SlowController {
  constructor(private readonly locks: LockService) {}

  @Get('timeout/:id')
  @DistributedLock({ key: 'timeout:{params.id}', waitTime: 10_000 })
  withTimeout(@Param('id') id: string): Observable<string> {
    return from(steps.runDeaf(`timeout:${id}`, this.locks.current()!.signal)).pipe(timeout(150));
  }

  @Get('race/:id')
  @DistributedLock({ key: 'race:{params.id}' })
  withRace(@Param('id') id: string): Observable<string> {
    const step = from(steps.runDeaf(`race:${id}`, this.locks.current()!.signal));
    return race(step, timer(150).pipe(map(() => 'too slow')));
  }

  @Get('fork/:id')
  @DistributedLock({ key: 'fork:{params.id}' })
  withFork(@Param('id') id: string): Observable<string[]> {
    const failing = sleep(150).then(() => Promise.reject(new Error('b failed')));
    return forkJoin([from(steps.runDeaf(`fork:${id}`, this.locks.current()!.signal)), from(failing)]);
  }

  @Get('promise-race/:id')
  @DistributedLock({ key: 'prace:{params.id}' })
  async promiseRace(@Param('id') id: string): Promise<string> {
    const step = steps.runDeaf(`prace:${id}`, this.locks.current()!.signal);
    return Promise.race([step, sleep(150).then(() => 'too slow')]);
  }

  @Get('listening/:id')
  @DistributedLock({ key: 'listening:{params.id}' })
  listening(@Param('id') id: string): Observable<string> {
    const step = from(steps.run(`listening:${id}`, this.locks.current()!.signal, 30_000));
    return race(step, timer(150).pipe(map(() => 'too slow')));
  }

  @Get('in-time/:id')
  @DistributedLock({ key: 'in-time:{params.id}' })
  inTime(@Param('id') id: string): Observable<string> {
    const signal = this.locks.current()!.signal;
    signals.push(signal);
    return from(steps.run(`in-time:${id}`, signal, 50)).pipe(timeout(5_000));
  }
}

@Injectable()
class Jobs {
  constructor(private readonly locks: LockService) {}

  /** A provider method returning an Observable: locked while subscribed. */
  @DistributedLock({ key: 'job:{0}' })
  sync(id: string): Observable<string> {
    return from(steps.runDeaf(`job:${id}`, this.locks.current()!.signal)).pipe(timeout(150));
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix))],
  controllers: [SlowController],
  providers: [Jobs],
})
class AppModule {}

describe("a result that ends while its work's promises still run", () => {
  let app: INestApplication;

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await redis.quit();
  });

  beforeEach(() => {
    steps = new Steps();
  });

  /** The step ran to its end holding the lock, told by its signal; the lock went once it ended. */
  async function expectKeptUntilTheStepEnded(name: string) {
    await eventually(() => steps.ended.length === 1);
    expect(steps.ended[0]).toMatchObject({ locked: true, aborted: true });
    expect(steps.ended[0].reason).toBeInstanceOf(LockCallEndedError);
    expect(steps.ended[0].reason).toMatchObject({ name: 'LockCallEndedError', key: name });
    await eventually(async () => (await redis.exists(lockKey(prefix, name))) === 0);
  }

  it.each([
    ['timeout', 'timeout:1', 500],
    ['race', 'race:1', 200],
    ['fork', 'fork:1', 500],
    ['promise-race', 'prace:1', 200],
  ])('HTTP %s: the caller gets its answer at once, the lock stays until the step ends', async (route, name, status) => {
    const response = await request(app.getHttpServer()).get(`/${route}/1`);
    expect(response.status).toBe(status);
    // Answered while the step still ran, under the lock.
    expect(steps.ended).toHaveLength(0);
    expect(await redis.exists(lockKey(prefix, name))).toBe(1);
    await expectKeptUntilTheStepEnded(name);
  });

  it('HTTP timeout: a second request does not run its step beside the first one', async () => {
    // Sent now (supertest sends once awaited).
    const first = request(app.getHttpServer())
      .get('/timeout/2')
      .then((r) => r.status);
    await eventually(() => steps.active === 1);
    const second = request(app.getHttpServer())
      .get('/timeout/2')
      .then((r) => r.status);
    expect(await Promise.all([first, second])).toEqual([500, 500]);
    await eventually(() => steps.ended.length === 2);
    expect(steps.most).toBe(1);
    expect(steps.ended.map((e) => e.locked)).toEqual([true, true]);
  });

  it('a step that stops on its signal ends at once, and so does the lock', async () => {
    const response = await request(app.getHttpServer()).get('/listening/1');
    expect([response.status, response.text]).toEqual([200, 'too slow']);
    // The step would run 30 s: the abort ended it.
    await expectKeptUntilTheStepEnded('listening:1');
  });

  it('work that ends with its result: the signal is not aborted, and the lock is free once the caller hears', async () => {
    const response = await request(app.getHttpServer()).get('/in-time/1');
    expect([response.status, response.text]).toEqual([200, 'done']);
    expect(await redis.exists(lockKey(prefix, 'in-time:1'))).toBe(0);
    expect(steps.ended).toEqual([{ locked: true, aborted: false, reason: undefined }]);
    expect(signals.at(-1)!.aborted).toBe(false);
  });

  it('a provider method returning an Observable with timeout(): the lock stays until the step ends', async () => {
    const outcome = await new Promise<string>((resolve) =>
      app
        .get(Jobs)
        .sync('1')
        .subscribe({ error: (e: Error) => resolve(e.name), complete: () => resolve('completed') }),
    );
    expect(outcome).toBe('TimeoutError');
    expect(steps.ended).toHaveLength(0);
    expect(await redis.exists(lockKey(prefix, 'job:1'))).toBe(1);
    await expectKeptUntilTheStepEnded('job:1');
  });
});
