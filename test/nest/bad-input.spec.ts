import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import fc from 'fast-check';
import type Redis from 'ioredis';
import { DistributedLock, LockOptionsError, LockService, RedisLockModule, type LockHandle } from '../../lib';
import {
  anyDuration,
  comesTooLate,
  isBelievableLease,
  isValidDuration,
  keysWithoutTtl,
  PROPERTY_RUNS,
  succeedsOrNamesTheOption,
} from '../support/bad-input';
import { connect, lockClient, testPrefix, type TestClient } from '../support/engine';
import { compileLockSpec } from '../../lib/internal';
import { lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();

@Injectable()
class Reports {
  constructor(readonly locks: LockService) {}

  @DistributedLock({ key: 'report:{0}', leaseTime: 1500.5 })
  async build(_id: string, inside: () => Promise<void>): Promise<number> {
    await inside();
    return this.locks.current()!.fencingToken;
  }
}

/** Any lease or wait given to LockService or @DistributedLock: a result or a LockOptionsError, never a stuck key. */
describe('bad input through the Nest layer', () => {
  let app: INestApplication;
  let locks: LockService;
  let other: TestClient;
  let redis: Redis;
  let n = 0;

  beforeAll(async () => {
    @Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))], providers: [Reports] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    locks = app.get(LockService);
    other = lockClient({ keyPrefix: prefix });
    redis = connect();
  });
  afterAll(async () => {
    await app.close();
    await other.close();
    await redis.quit();
  });

  /** LockService also takes 'watchdog' for leaseTime and Infinity for waitTime. */
  const serviceLease = fc.oneof(anyDuration, fc.constant('watchdog'));

  it('property: LockService.lock / tryLock / withLock', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('reentrant', 'fair', 'simple'),
        fc.constantFrom('lock', 'tryLock', 'withLock'),
        serviceLease,
        anyDuration,
        async (kind, call, leaseTime, waitTime) => {
          const name = `svc${++n}`;
          const options = { kind, leaseTime, waitTime } as never;
          const valid =
            (leaseTime === 'watchdog' || isValidDuration(leaseTime, { positive: true })) &&
            isBelievableLease(leaseTime) &&
            isValidDuration(waitTime, { positive: false, infinite: true });
          // A grant whose reply comes after its lease is never handed out: a lease of a few ms may come back
          // empty on a busy machine, or be found never to suffice.
          const mayComeBackEmpty = typeof leaseTime === 'number' && leaseTime < 1_000;
          await succeedsOrNamesTheOption(valid, name, async () => {
            try {
              if (call === 'withLock') return await locks.withLock(name, () => undefined, options);
              const handle = (await locks[call](name, options)) as LockHandle | null;
              if (handle === null && mayComeBackEmpty) return;
              await handle!.release();
            } catch (error) {
              if (!(mayComeBackEmpty && valid && comesTooLate(error))) throw error;
            }
          });
          expect(await keysWithoutTtl(redis, prefix)).toEqual([]);
          const again = await other.locks.getLock(name).tryLock();
          expect(again).not.toBeNull();
          await again!.release();
        },
      ),
      {
        numRuns: PROPERTY_RUNS,
        examples: (['reentrant', 'fair', 'simple'] as const).flatMap((kind) =>
          (['lock', 'tryLock', 'withLock'] as const).flatMap((call) => [
            [kind, call, undefined, null] as [typeof kind, typeof call, unknown, unknown],
            [kind, call, null, undefined] as [typeof kind, typeof call, unknown, unknown],
          ]),
        ),
      },
    );
  });

  it('LockService refuses options that are not an object with a LockOptionsError naming the lock', async () => {
    const name = `svc-not-object${++n}`;
    for (const options of [null, 5, 'fast'] as never[]) {
      const refused = { name: 'LockOptionsError', key: name };
      await expect(locks.lock(name, options)).rejects.toMatchObject(refused);
      await expect(locks.tryLock(name, options)).rejects.toMatchObject(refused);
      await expect(locks.withLock(name, () => 'ran', options)).rejects.toMatchObject(refused);
      await expect(locks.unlock(name, options)).rejects.toMatchObject(refused);
      await expect(locks.forceUnlock(name, options)).rejects.toMatchObject(refused);
    }
    expect(await redis.exists(other.locks.getLock(name).keys.lock)).toBe(0);
  });

  it('property: @DistributedLock() options are checked as the application starts, naming the bad one', () => {
    fc.assert(
      fc.property(fc.oneof(anyDuration, fc.constant('watchdog')), anyDuration, (leaseTime, waitTime) => {
        const valid =
          (leaseTime === 'watchdog' || isValidDuration(leaseTime, { positive: true })) &&
          isValidDuration(waitTime, { positive: false, infinite: true });
        // What bootstrap runs for every decorated method (an app with one bad method refuses to start).
        const compile = () => compileLockSpec({ key: 'job', leaseTime, waitTime }, 'Job.run');
        if (valid) {
          const spec = compile();
          expect(spec.leaseTime).toBe(leaseTime);
          expect(spec.waitTime).toBe(waitTime);
        } else {
          expect(compile).toThrow(LockOptionsError);
          expect(compile).toThrow(/leaseTime|waitTime/);
        }
      }),
      { numRuns: PROPERTY_RUNS * 5 },
    );
  });

  it("onBusy takes 'throw' or 'skip', and 'skip' only on methods that are not handlers", () => {
    expect(compileLockSpec({ key: 'job', onBusy: 'skip' }, 'Job.run').onBusy).toBe('skip');
    expect(compileLockSpec({ key: 'job' }, 'Job.run').onBusy).toBe('throw');
    expect(() => compileLockSpec({ key: 'job', onBusy: 'later' }, 'Job.run')).toThrow(
      /onBusy must be 'throw' or 'skip'/,
    );
    expect(() => compileLockSpec({ key: 'job', onBusy: 'skip' }, 'Api.get', 'http')).toThrow(/not handlers/);
  });

  it('a decorated method with a fractional lease holds the lock for the lease rounded up', async () => {
    const reports = app.get(Reports);
    const key = lockKey(prefix, 'report:r1');
    let pttl = 0;
    const token = await reports.build('r1', async () => void (pttl = await redis.pttl(key)));
    expect(token).toBeGreaterThan(0);
    expect(pttl).toBeGreaterThan(1_000);
    expect(pttl).toBeLessThanOrEqual(1_501);
    expect(await redis.exists(key)).toBe(0); // released after the call
  });
});
