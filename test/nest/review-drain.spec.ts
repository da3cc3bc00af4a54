import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { lastValueFrom, Observable, of } from 'rxjs';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { DistributedLock, LockModuleClosedError, LockService, RedisLockModule } from '../../lib';
import { connect, eventually, testPrefix } from '../support/engine';
import { gate, lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();

let started = gate();
let proceed = gate();

@Injectable()
class Rollup {
  constructor(private readonly locks: LockService) {}

  /** A job in flight at shutdown: the module lets it finish, so its steps must keep working meanwhile. */
  @DistributedLock({ key: 'rollup:{0}' })
  async run(id: string): Promise<number> {
    started.open();
    await proceed.promise;
    // A step from inside its own critical section: it re-enters the lock the job holds.
    return this.step(id);
  }

  @DistributedLock({ key: 'rollup:{0}', waitTime: 0 })
  async step(id: string): Promise<number> {
    return this.locks.reentrant(`rollup:${id}`).getHoldCount();
  }

  /** The same, re-entering through LockService. */
  @DistributedLock({ key: 'svc-rollup:{0}' })
  async viaService(id: string): Promise<string> {
    started.open();
    await proceed.promise;
    return this.locks.withLock(`svc-rollup:${id}`, () => 're-entered', { waitTime: 0 });
  }

  /** The same, re-entering through a decorated method that returns an Observable. */
  @DistributedLock({ key: 'obs-rollup:{0}' })
  async viaObservable(id: string): Promise<string> {
    started.open();
    await proceed.promise;
    return lastValueFrom(this.stream(id));
  }

  @DistributedLock({ key: 'obs-rollup:{0}', waitTime: 0 })
  stream(_id: string): Observable<string> {
    return of('re-entered');
  }

  /** A new lock, not held yet: refused once shutdown has started. */
  @DistributedLock({ key: 'other:{0}', waitTime: 0 })
  async other(_id: string): Promise<string> {
    return 'ran';
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 10_000 }))],
  providers: [Rollup],
})
class AppModule {}

/** Resolves once shutdown has started: a new lock is refused with LockModuleClosedError. */
function refusingNewLocks(locks: LockService): Promise<void> {
  return eventually(async () => {
    const refused = await locks.withLock('fresh', () => 'ran', { waitTime: 0 }).catch((error: unknown) => error);
    return refused instanceof LockModuleClosedError;
  });
}

/**
 * app.close() waits up to shutdownTimeout for locked work still running (docs/nest.md, Shutdown): that
 * work must be able to run to its end, re-entering the locks it holds, as it does before shutdown.
 * The explorer unbound the decorated instances first, and the re-entry itself was refused as a new
 * lock: the very work shutdown waits for failed.
 */
describe('review: locked work still running while app.close() drains', () => {
  let app: INestApplication | undefined;
  let redis: Redis;

  beforeAll(() => {
    redis = connect();
  });
  beforeEach(async () => {
    started = gate();
    proceed = gate();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterEach(async () => {
    proceed.open();
    await app?.close();
  });
  afterAll(async () => {
    await redis.quit();
  });

  it.each([
    ['a decorated method', (rollup: Rollup) => rollup.run('1'), 2, 'rollup:1'],
    ['LockService.withLock', (rollup: Rollup) => rollup.viaService('1'), 're-entered', 'svc-rollup:1'],
    ['a decorated Observable method', (rollup: Rollup) => rollup.viaObservable('1'), 're-entered', 'obs-rollup:1'],
  ] as const)('%s re-entering the lock its job holds works during the drain', async (_how, start, result, name) => {
    const job: Promise<unknown> = start(app!.get(Rollup));
    job.catch(() => undefined);
    await started.promise;
    const locks = app!.get(LockService);
    const closing = app!.close();
    app = undefined;
    // Shutdown has started (new locks are refused) and waits for the job.
    await refusingNewLocks(locks);
    proceed.open();
    await expect(job).resolves.toBe(result); // the step re-entered the job's hold
    await closing;
    expect(await redis.exists(lockKey(prefix, name))).toBe(0);
  });

  it('a new lock taken by running work during the drain is still refused', async () => {
    const rollup = app!.get(Rollup);
    const locks = app!.get(LockService);
    const job = locks.withLock('holder', async () => {
      started.open();
      await proceed.promise;
      return rollup.other('1');
    });
    job.catch(() => undefined);
    await started.promise;
    const closing = app!.close();
    app = undefined;
    await refusingNewLocks(locks);
    proceed.open();
    await expect(job).rejects.toBeInstanceOf(LockModuleClosedError);
    await closing;
    expect(await redis.exists(lockKey(prefix, 'other:1'))).toBe(0);
  });
});
