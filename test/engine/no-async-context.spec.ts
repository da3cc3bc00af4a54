import { AsyncLocalStorage } from 'node:async_hooks';
import { eventually, lockClient, testPrefix, type TestClient } from '../support/engine';

/**
 * A lock call keeps what its waits share (a fair wait's waiter id and grants, a writer's wait id) in the
 * call itself, never in an AsyncLocalStorage: on Node 20 and 22 the first run() of one installs promise
 * hooks that every promise of the user's process pays from then on. Waits of two calls at once stay
 * apart all the same (each call queues under its own id; see fair-lock-identity.spec.ts).
 */
describe('lock calls start no AsyncLocalStorage', () => {
  let a: TestClient;
  let b: TestClient;
  const keyPrefix = testPrefix();

  beforeAll(() => {
    a = lockClient({ keyPrefix });
    b = lockClient({ keyPrefix });
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await Promise.all([a.close(), b.close()]);
  });

  it('fair and write locks, taken at once, waited for, released and given up', async () => {
    const run = jest.spyOn(AsyncLocalStorage.prototype, 'run');
    const enterWith = jest.spyOn(AsyncLocalStorage.prototype, 'enterWith');

    // A fair lock: one holder, two calls that wait (one of them hands over to the other), one that gives up.
    const held = await a.locks.getFairLock('fair').lock();
    const { queue } = a.locks.getFairLock('fair').keys;
    // Queued one after the other: sent at once on two connections, they could reach Redis in either order.
    const first = b.locks.getFairLock('fair').lock();
    await eventually(async () => (await a.redis.llen(queue)) === 1, 5_000);
    const second = a.locks.getFairLock('fair').lock();
    await eventually(async () => (await a.redis.llen(queue)) === 2, 5_000);
    await expect(b.locks.getFairLock('fair').tryLock({ waitTime: 50 })).resolves.toBeNull();
    await held.release();
    await (await first).release();
    await (await second).release();

    // A write lock waited for behind a reader, and one that gives up.
    const reader = await a.locks.getReadWriteLock('rw').readLock().lock();
    const writer = b.locks.getReadWriteLock('rw').writeLock().lock();
    await expect(a.locks.getReadWriteLock('rw').writeLock().tryLock({ waitTime: 50 })).resolves.toBeNull();
    await reader.release();
    await (await writer).release();

    expect(run).not.toHaveBeenCalled();
    expect(enterWith).not.toHaveBeenCalled();
  });
});
