/**
 * Two RedisLockModules in one application (isGlobal: false, each imported by its own feature module,
 * with its own key prefix): a feature's decorated provider methods lock through the module its feature
 * can inject, never through the other one, and a provider that could inject both refuses to start.
 */
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { DistributedLock, LockOptionsError, RedisLockModule } from '../../lib';
import { connect, sleep, testPrefix } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

const prefixA = testPrefix();
const prefixB = testPrefix();
let redis: Redis;

/** Which prefix held the lock while a call ran, and how many calls ran at once. */
const seen: { prefixA: boolean; prefixB: boolean }[] = [];
let running = 0;
let mostRunning = 0;

async function lockedUnder(name: string): Promise<void> {
  mostRunning = Math.max(mostRunning, ++running);
  try {
    seen.push({
      prefixA: (await redis.exists(lockKey(prefixA, name))) === 1,
      prefixB: (await redis.exists(lockKey(prefixB, name))) === 1,
    });
    await sleep(100);
  } finally {
    running--;
  }
}

@Injectable()
class JobA {
  @DistributedLock({ key: 'job-a' })
  async run(): Promise<void> {
    await lockedUnder('job-a');
  }
}

@Injectable()
class JobB {
  @DistributedLock({ key: 'job-b' })
  async run(): Promise<void> {
    await lockedUnder('job-b');
  }
}

@Injectable()
class SharedJob {
  @DistributedLock({ key: 'shared' })
  async run(): Promise<void> {
    await lockedUnder('shared');
  }
}

@Injectable()
class TornJob {
  @DistributedLock({ key: 'torn' })
  async run(): Promise<void> {
    await lockedUnder('torn');
  }
}

const moduleA = RedisLockModule.forRoot({ ...lockOptions(prefixA), isGlobal: false });
const moduleB = RedisLockModule.forRoot({ ...lockOptions(prefixB), isGlobal: false });

@Module({ imports: [moduleA], providers: [JobA], exports: [JobA] })
class FeatureA {}

@Module({ imports: [moduleB], providers: [JobB], exports: [JobB] })
class FeatureB {}

/** A shared module that imports and re-exports module B. */
@Module({ imports: [moduleB], exports: [moduleB] })
class LocksB {}

@Module({ imports: [LocksB], providers: [SharedJob], exports: [SharedJob] })
class SharedFeature {}

/** JobA alone, with the module its feature imports (prefix A): another instance of the same service. */
@Module({ imports: [FeatureA] })
class OnlyA {}

@Module({ imports: [FeatureA, FeatureB, SharedFeature] })
class Both {}

/** A feature that can inject both modules: which one should lock its methods? */
@Module({ imports: [moduleA, LocksB], providers: [TornJob] })
class Torn {}

async function start(root: new () => object): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({ imports: [root] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

describe('two RedisLockModules (isGlobal: false) in one application', () => {
  beforeAll(() => {
    redis = connect();
  });
  afterAll(async () => {
    await redis.quit();
  });
  beforeEach(() => {
    seen.length = 0;
    mostRunning = 0;
  });

  it("each feature's decorated methods lock through the module that feature imports (its prefix)", async () => {
    const app = await start(Both);
    try {
      await app.get(JobA).run();
      await app.get(JobB).run();
      // Through a shared module that re-exports it.
      await app.get(SharedJob).run();
      expect(seen).toEqual([
        { prefixA: true, prefixB: false },
        { prefixA: false, prefixB: true },
        { prefixA: false, prefixB: true },
      ]);
    } finally {
      await app.close();
    }
  });

  it('JobA of an application with both features and JobA of one with FeatureA alone exclude each other', async () => {
    const both = await start(Both);
    const only = await start(OnlyA);
    try {
      await Promise.all([both.get(JobA).run(), only.get(JobA).run(), both.get(JobA).run()]);
      expect(seen).toHaveLength(3);
      expect(mostRunning).toBe(1);
    } finally {
      await both.close();
      await only.close();
    }
  });

  it('a provider whose module can inject both modules fails bootstrap with a LockOptionsError naming its class', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [Torn] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      const error = await app.init().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LockOptionsError);
      expect((error as Error).message).toMatch(/TornJob .*2 RedisLockModules/);
    } finally {
      await app.close();
    }
  });
});
