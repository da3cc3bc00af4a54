import { getEventListeners } from 'node:events';
import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DistributedLock, LockModuleClosedError, LockService, RedisLockModule } from '../../lib';
import { LockLifecycle } from '../../lib/internal';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { lockOptions } from './nest-support';

const prefix = testPrefix();

/**
 * The signals Node keeps referenced from `signal` for the signals AbortSignal.any made from it
 * (its internal kDependantSignals set), or undefined if this Node keeps none there.
 */
function dependantsOf(signal: AbortSignal): number | undefined {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  const set = key === undefined ? undefined : (signal as unknown as Record<symbol, Set<unknown>>)[key];
  return set?.size;
}

@Injectable()
class Jobs {
  @DistributedLock({ key: 'shutdown-signal-job' })
  async run(): Promise<string> {
    return 'done';
  }
}

/**
 * Every wait of the module also ends at its shutdown. Combining that with a caller's signal through
 * AbortSignal.any kept each combined signal referenced from the module's long-lived shutdown signal on
 * Node 20, for good: every decorated call and every LockService call given a signal leaked one.
 */
describe('the module shutdown signal, beside each call', () => {
  let app: INestApplication;
  let locks: LockService;
  let holder: TestClient;

  beforeAll(async () => {
    @Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))], providers: [Jobs] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    locks = app.get(LockService);
    holder = lockClient({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await app?.close();
    await holder.close();
  });

  it('decorated calls and LockService calls with a signal leave nothing on the shutdown signal', async () => {
    // The probe works on this Node: a signal AbortSignal.any made is counted on its source.
    const control = new AbortController().signal;
    AbortSignal.any([new AbortController().signal, control]);
    expect(dependantsOf(control)).toBe(1);

    const shutdown = app.get(LockLifecycle).signal;
    const jobs = app.get(Jobs);
    for (let i = 0; i < 20; i++) {
      const signal = new AbortController().signal;
      expect(await jobs.run()).toBe('done');
      await locks.withLock('shutdown-signal-with', () => undefined, { signal });
      await (await locks.lock('shutdown-signal-lock', { signal })).release();
      await (await locks.tryLock('shutdown-signal-try', { signal }))!.release();
      await locks.withLock('shutdown-signal-permit', () => undefined, { signal, permits: 2 });
    }
    expect(dependantsOf(shutdown) ?? 0).toBe(0);
    expect(getEventListeners(shutdown, 'abort').length).toBeLessThanOrEqual(1);
  });

  it("a waiting call given a signal ends with the caller's reason when it aborts", async () => {
    const held = await holder.locks.getLock('shutdown-signal-abort').lock();
    const own = new AbortController();
    const waiting = locks.lock('shutdown-signal-abort', { signal: own.signal });
    await sleep(100);
    const reason = new Error('caller gone');
    own.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    await held.release();
  });

  it('waiting calls, decorated or given a signal, end with LockModuleClosedError when the application shuts down', async () => {
    const held = await holder.locks.getLock('shutdown-signal-job').lock();
    const heldToo = await holder.locks.getLock('shutdown-signal-close').lock();
    const job = app.get(Jobs).run();
    const call = locks.lock('shutdown-signal-close', { signal: new AbortController().signal });
    job.catch(() => undefined);
    call.catch(() => undefined);
    await sleep(200);
    const closing = app.close();
    await expect(job).rejects.toBeInstanceOf(LockModuleClosedError);
    await expect(call).rejects.toBeInstanceOf(LockModuleClosedError);
    await closing;
    app = undefined as unknown as INestApplication;
    await held.release();
    await heldToo.release();
  }, 30_000);
});
