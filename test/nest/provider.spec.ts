import { Injectable, Module, SetMetadata, type INestApplicationContext, type OnModuleInit } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { lastValueFrom, timer, map, Observable } from 'rxjs';
import {
  DistributedLock,
  LockAcquireTimeoutError,
  LockError,
  LockKeyError,
  LockService,
  LockModuleClosedError,
  RedisLockModule,
  runInLockScope,
  type RedisLockModuleOptions,
} from '../../lib';
import { connect, eventually, quietLogger, sleep, testPrefix } from '../support/engine';
import { connectionsNamed, lockKey, lockOptions, singleConnection } from './nest-support';

const prefix = testPrefix();

/** Shared by both applications in this process: how many runs of a job overlap. */
const jobs = { active: 0, maxActive: 0, runs: 0, overlaps: 0 };

async function exclusiveWork(ms: number): Promise<void> {
  jobs.active++;
  jobs.runs++;
  if (jobs.active > 1) jobs.overlaps++;
  jobs.maxActive = Math.max(jobs.maxActive, jobs.active);
  await sleep(ms);
  jobs.active--;
}

class CustomError extends Error {}

@Injectable()
class JobService {
  readonly label = 'job-service';

  constructor(private readonly locks: LockService) {}

  @DistributedLock({ key: 'job:{0}' })
  async run(_id: string): Promise<void> {
    await exclusiveWork(5);
  }

  @DistributedLock({ key: 'order:{args.0.id}:{1}' })
  async named(order: { id: number }, step: string): Promise<string | undefined> {
    return `${this.label}/${this.locks.current()?.name}/${order.id}/${step}`;
  }

  @DistributedLock({ key: 'inspected:{0}' })
  async inspectOwnLock(id: string) {
    return this.locks.inspect(`inspected:${id}`);
  }

  @DistributedLock({ key: (order: { id: number }) => `fn-order:${order.id}` })
  async byFunction(_order: { id: number }): Promise<string | undefined> {
    return this.locks.current()?.name;
  }

  @DistributedLock({ key: 'fail:{0}' })
  async fail(_id: string, error: Error): Promise<never> {
    throw error;
  }

  @SetMetadata('below', 'b')
  @DistributedLock({ key: 'meta' })
  @SetMetadata('above', 'a')
  async withMetadata(): Promise<number> {
    return 42;
  }

  @DistributedLock({ key: 'account:{0}' })
  async outer(id: string): Promise<number> {
    return this.inner(id);
  }

  @DistributedLock({ key: 'account:{0}', waitTime: 0 })
  async inner(id: string): Promise<number> {
    return this.locks.reentrant(`account:${id}`).getHoldCount();
  }

  @DistributedLock({ key: 'isolated:{0}', newScope: true, waitTime: 50 })
  async isolated(_id: string): Promise<void> {
    await sleep(300);
  }

  @DistributedLock({ key: 'shared:{0}', waitTime: 50 })
  async shared(_id: string): Promise<void> {
    await sleep(300);
  }

  @DistributedLock({ key: 'stream:{0}' })
  ticks(id: string): Observable<string> {
    return timer(200).pipe(map(() => `${id}:${this.locks.current()?.name}`));
  }
}

@Injectable()
class ScheduledJob {
  @Interval(15)
  @DistributedLock({ key: 'interval-job', waitTime: 0 })
  async tick(): Promise<void> {
    await exclusiveWork(30);
  }
}

@Injectable()
class SlowJob {
  @DistributedLock({ key: 'slow:{0}' })
  async slow(_id: string, ms: number): Promise<string> {
    await sleep(ms);
    return 'done';
  }
}

@Injectable()
class StartupMigration implements OnModuleInit {
  result?: string;
  constructor(private readonly locks: LockService) {}

  async onModuleInit(): Promise<void> {
    this.result = await this.migrate();
  }

  @DistributedLock({ key: 'migration' })
  async migrate(): Promise<string> {
    return `migrated under ${this.locks.current()?.name}`;
  }
}

@Injectable()
class NightlyJob {
  runs = 0;

  @DistributedLock({ key: 'nightly', waitTime: 0, onBusy: 'skip' })
  async skipWhenBusy(): Promise<string> {
    this.runs++;
    return 'ran';
  }

  @DistributedLock({ key: 'nightly', waitTime: 0 })
  async throwWhenBusy(): Promise<string> {
    this.runs++;
    return 'ran';
  }

  /** Its own nested lock times out: that error is the method's, not a busy lock, and passes through. */
  @DistributedLock({ key: 'outer-job', waitTime: 0, onBusy: 'skip' })
  async nestedTimeout(locks: LockService): Promise<void> {
    this.runs++;
    await locks.withLock('nightly', () => undefined, { waitTime: 0, newScope: true });
  }
}

/** An application with its own RedisLockModule and connections. */
async function createApp(
  providers: unknown[],
  imports: unknown[] = [],
  connectionName?: string,
  options: Partial<RedisLockModuleOptions> = {},
) {
  @Module({
    imports: [
      ...(imports as []),
      RedisLockModule.forRoot(
        lockOptions(prefix, {
          ...(connectionName ? { connection: singleConnection(connectionName) } : {}),
          ...options,
        }),
      ),
    ],
    providers: providers as [],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

describe('@DistributedLock on provider methods', () => {
  let redis: Redis;
  let first: INestApplicationContext;
  let second: INestApplicationContext;

  beforeAll(async () => {
    redis = connect();
    first = await createApp([JobService, StartupMigration]);
    second = await createApp([JobService, StartupMigration]);
  });

  afterAll(async () => {
    await first?.close();
    await second?.close();
    await redis.quit();
  });

  beforeEach(() => Object.assign(jobs, { active: 0, maxActive: 0, runs: 0, overlaps: 0 }));

  it('runs exclusively across two applications, each with its own connections', async () => {
    const a = first.get(JobService);
    const b = second.get(JobService);
    expect(a).not.toBe(b);
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).run('same')));
    expect(jobs.runs).toBe(20);
    expect(jobs.overlaps).toBe(0);
    // Control: different keys do run in parallel.
    await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).run(`k${i}`)));
    expect(jobs.maxActive).toBeGreaterThan(1);
  });

  it('locks @Interval jobs of two applications (the decorator wraps before @nestjs/schedule takes the method)', async () => {
    const one = await createApp([ScheduledJob], [ScheduleModule.forRoot()]);
    const two = await createApp([ScheduledJob], [ScheduleModule.forRoot()]);
    try {
      await eventually(() => jobs.runs >= 8, 10_000);
    } finally {
      await one.close();
      await two.close();
    }
    expect(jobs.overlaps).toBe(0);
  });

  it('builds the key from the arguments, by template or function, and keeps `this` and the result', async () => {
    const jobsService = first.get(JobService);
    expect(await jobsService.named({ id: 7 }, 'pay')).toBe('job-service/order:7:pay/7/pay');
    expect(await jobsService.byFunction({ id: 8 })).toBe('fn-order:8');
  });

  it("onBusy: 'skip' resolves undefined without running the method, logged at debug only; the default throws", async () => {
    const debug: string[] = [];
    const logger = { debug: (m: string) => debug.push(m), warn: () => undefined, error: () => undefined };
    const app = await createApp([NightlyJob], [], undefined, { logger });
    try {
      const job = app.get(NightlyJob);
      const locks = app.get(LockService);
      expect(await job.skipWhenBusy()).toBe('ran');
      const held = await locks.lock('nightly', { owner: 'another-instance' });
      expect(await job.skipWhenBusy()).toBeUndefined();
      expect(debug).toEqual(['NightlyJob.skipWhenBusy skipped: lock "nightly" is held elsewhere (onBusy: \'skip\')']);
      await expect(job.throwWhenBusy()).rejects.toBeInstanceOf(LockAcquireTimeoutError);
      await expect(job.nestedTimeout(locks)).rejects.toBeInstanceOf(LockAcquireTimeoutError);
      expect(job.runs).toBe(2);
      await held.release();
    } finally {
      await app.close();
    }
  });

  it('LockService.inspect shows the lock a decorated method holds while it runs, and free after', async () => {
    const jobs = first.get(JobService);
    const during = await jobs.inspectOwnLock('i1');
    expect(during.state).toBe('held');
    expect(during.holders).toHaveLength(1);
    expect(during.holders[0].holdCount).toBe(1);
    expect(during.remainingLeaseMs).toBeGreaterThan(0);
    const after = await first.get(LockService).inspect('inspected:i1');
    expect(after.state).toBe('free');
    expect(after.fencingToken).toBe(during.fencingToken);
  });

  it('rethrows the method’s own error unchanged and releases the lock', async () => {
    const error = new CustomError('boom');
    await expect(first.get(JobService).fail('f1', error)).rejects.toBe(error);
    expect(await redis.exists(lockKey(prefix, 'fail:f1'))).toBe(0);
  });

  it('rejects a call whose key value is missing with LockKeyError, taking no lock', async () => {
    const error = await first
      .get(JobService)
      .named(undefined as unknown as { id: number }, 'x')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockKeyError);
    expect((error as LockKeyError).placeholder).toBe('{args.0.id}');
    const keys = await redis.keys(`${prefix}:{order:*`);
    // Fencing counters of earlier tests stay, and their records of holds by id for a minute (hold-ids.lua).
    expect(keys.filter((key) => !/:(fence|grants)$/.test(key))).toEqual([]);
  });

  it("keeps other decorators' metadata on the method", () => {
    const reflector = first.get(Reflector);
    const method = JobService.prototype.withMetadata;
    expect(reflector.get('below', method)).toBe('b');
    expect(reflector.get('above', method)).toBe('a');
    expect(method.name).toBe('withMetadata');
  });

  it('re-enters when a locked method calls another method locking the same key', async () => {
    expect(await first.get(JobService).outer('acc-1')).toBe(2);
  });

  it('parallel calls in one scope exclude each other (re-entry only from inside), with or without newScope', async () => {
    const service = first.get(JobService);
    // One scope (say, one request) calling twice in parallel: two branches, two owners.
    for (const call of [(id: string) => service.shared(id), (id: string) => service.isolated(id)]) {
      const results = await runInLockScope(() => Promise.allSettled([call('p1'), call('p1')]));
      expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(rejected.reason).toBeInstanceOf(LockAcquireTimeoutError);
    }
  });

  it('holds the lock of a method returning an Observable while it is subscribed', async () => {
    const stream = first.get(JobService).ticks('s1');
    expect(await redis.exists(lockKey(prefix, 'stream:s1'))).toBe(0); // lazy: nothing before subscribing
    const value = lastValueFrom(stream);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'stream:s1'))) === 1);
    expect(await value).toBe('s1:stream:s1');
    expect(await redis.exists(lockKey(prefix, 'stream:s1'))).toBe(0);
  });

  it("works from another provider's onModuleInit", () => {
    expect(first.get(StartupMigration).result).toBe('migrated under migration');
  });

  it('fails clearly when the instance belongs to no initialised application', async () => {
    const orphan = new JobService(first.get(LockService));
    const error = await orphan.run('x').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockError);
    expect((error as Error).message).toContain('JobService.run');
    expect((error as Error).message).toContain('RedisLockModule');
  });

  it('fails after app.close(), and the closed application left no connection behind', async () => {
    const connectionName = `provider-${prefix}`;
    const app = await createApp([JobService], [], connectionName);
    const service = app.get(JobService);
    await service.run('before-close');
    expect(await connectionsNamed(redis, connectionName)).toBe(2);
    await app.close();
    expect(await connectionsNamed(redis, connectionName)).toBe(0);
    await expect(service.run('after-close')).rejects.toThrow(/RedisLockModule/);
  });

  it('on app.close() lets running locked work finish first, cutting waits short and refusing new locks', async () => {
    const app = await createApp([SlowJob]);
    const job = app.get(SlowJob);
    const locks = app.get(LockService);
    const running = job.slow('s1', 400);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'slow:s1'))) === 1);
    const waiting = locks.withLock('slow:s1', () => 'never').catch((e: unknown) => e);
    await sleep(50);
    const closing = app.close();
    expect(await waiting).toBeInstanceOf(LockModuleClosedError);
    await expect(locks.lock('another')).rejects.toBeInstanceOf(LockModuleClosedError);
    await expect(running).resolves.toBe('done'); // ran to the end under its lock
    await closing;
    expect(await redis.exists(lockKey(prefix, 'slow:s1'))).toBe(0);
  });

  it('releases the locks of work still running after shutdownTimeout, and says so', async () => {
    const app = await createApp([SlowJob], [], undefined, { shutdownTimeout: 100 });
    const running = app.get(SlowJob).slow('s2', 1_500);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'slow:s2'))) === 1);
    const started = Date.now();
    await app.close();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await redis.exists(lockKey(prefix, 'slow:s2'))).toBe(0);
    expect(quietLogger.warnings.some((w) => w.includes('still ran 100 ms into shutdown'))).toBe(true);
    await running;
  });
});
