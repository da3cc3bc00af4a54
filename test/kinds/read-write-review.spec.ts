import { LockUpgradeError, runInLockScope } from '../../lib/internal';
import { lockClient, testPrefix, type TestClient } from '../support/engine';

/** Runs `fn` as another owner (a fresh lock scope), like a concurrent request would. */
const asOther = <T>(fn: () => Promise<T>): Promise<T> => runInLockScope(fn, { newScope: true });

/** Paths of the read-write lock the happy tests never take (review of the read-write lock). */
describe('ReadWriteLock under review', () => {
  const prefix = testPrefix();
  let client: TestClient;
  let name: string;

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix, watchdogTimeout: 900 });
  });
  beforeEach(() => (name = `rwr-${Math.random().toString(36).slice(2)}`));
  afterAll(() => client.close());

  const rwOf = (c: TestClient = client) => c.locks.getReadWriteLock(name);

  it('a write section opened inside a read section of the same lock is an upgrade: LockUpgradeError at once, no intent', async () => {
    const rw = rwOf();
    await rw.readLock().withLock(async () => {
      const started = Date.now();
      // A section of its own (nested in the reader's) would wait for its own caller's read hold.
      await expect(rw.writeLock().withLock(() => 'wrote', { waitTime: 4_000 })).rejects.toBeInstanceOf(
        LockUpgradeError,
      );
      expect(Date.now() - started).toBeLessThan(3_000); // refused, not waited out
      expect(await client.redis.exists(rw.keys.writers)).toBe(0); // no intent holds other readers back
      const otherRead = await asOther(() => rw.readLock().tryLock());
      expect(otherRead).not.toBeNull();
      await otherRead!.release();
    });
    expect(await rw.readLock().isLocked()).toBe(false);
  });
});
