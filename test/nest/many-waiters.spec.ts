import { getEventListeners } from 'node:events';
import type { INestApplication } from '@nestjs/common';
import type { LockService } from '../../lib';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { engineOf, LockLifecycle } from '../../lib/internal';
import { lockServiceApp } from './nest-support';

const prefix = testPrefix();

/**
 * A thousand callers waiting in one process share the module's shutdown signal: one listener on it,
 * never one per caller (which is what would make Node warn of a listener leak). The listener counts are
 * checked, not the warning: Node's warnings go to the real process, which a test's sandbox never hears.
 */
describe('many waiters in one process', () => {
  let app: INestApplication;
  let locks: LockService;
  let holder: TestClient;

  beforeAll(async () => {
    ({ app, locks } = await lockServiceApp(prefix));
    holder = lockClient({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await app.close();
    await holder.close();
  });

  it('1,000 concurrent LockService.withLock callers all run, one at a time, sharing one listener on the shutdown signal', async () => {
    const held = await holder.locks.getLock('crowded').lock();
    let active = 0;
    let overlaps = 0;
    let done = 0;
    const callers = Array.from({ length: 1_000 }, () =>
      locks.withLock(
        'crowded',
        async () => {
          if (++active > 1) overlaps++;
          await new Promise((resolve) => setImmediate(resolve));
          active--;
          done++;
        },
        { waitTime: 120_000 },
      ),
    );
    await eventually(() => engineOf(locks.client).waiters.channelCount > 0, 10_000);
    await sleep(1_000); // every caller has tried once and parked
    // Every caller waits on the module's shutdown signal (through its own): one listener on it at most.
    expect(getEventListeners(app.get(LockLifecycle).signal, 'abort').length).toBeLessThanOrEqual(1);
    await held.release();
    await Promise.all(callers);
    expect(done).toBe(1_000);
    expect(overlaps).toBe(0);
  }, 120_000);

  it('engine: waits sharing one caller signal add one listener to it, and an abort ends them all', async () => {
    const held = await holder.locks.getLock('shared-signal').lock();
    const stop = new AbortController();
    const waiter = locks.client.getLock('shared-signal');
    const waits = Array.from({ length: 200 }, () =>
      waiter.lock({ signal: stop.signal, waitTime: 60_000 }).then(
        () => 'acquired',
        (error: unknown) => (error === stop.signal.reason ? 'aborted' : String(error)),
      ),
    );
    await eventually(() => getEventListeners(stop.signal, 'abort').length === 1, 10_000);
    stop.abort(new Error('enough'));
    expect(new Set(await Promise.all(waits))).toEqual(new Set(['aborted']));
    await held.release();
  }, 60_000);
});
