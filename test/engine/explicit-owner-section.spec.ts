import { runInLockScope } from '../../lib';
import { lockClient, testPrefix, type TestClient } from '../support/engine';

/**
 * A section opened with an explicit owner (`withLock(fn, { owner: 'job-7' })`) runs as that owner: a call
 * from inside it re-enters, as it does inside a section of the scope's own owner, instead of waiting for
 * its own caller (without a waitTime, for ever). Siblings inside it still exclude each other, and a lock
 * the section does not hold is taken under an owner of the call's own.
 */
describe('a section of an explicit owner', () => {
  const prefix = testPrefix();
  let c: TestClient;
  beforeAll(() => (c = lockClient({ keyPrefix: prefix })));
  afterAll(() => c.close());

  it.each(['reentrant', 'fair', 'write'] as const)(
    '%s: a call from inside re-enters under that owner',
    async (kind) => {
      const name = `explicit-section-${kind}`;
      const lock =
        kind === 'fair'
          ? c.locks.getFairLock(name)
          : kind === 'write'
            ? c.locks.getReadWriteLock(name).writeLock()
            : c.locks.getLock(name);
      const inner = await lock.withLock(
        async () => lock.withLock(async ({ fencingToken }) => fencingToken, { waitTime: 3_000 }),
        { owner: 'job-7' },
      );
      expect(typeof inner).toBe('number');
      expect(await lock.isLocked()).toBe(false);
    },
    20_000,
  );

  it('a read inside a write section of an explicit owner re-enters the read side', async () => {
    const rw = c.locks.getReadWriteLock('explicit-section-downgrade');
    const read = await rw
      .writeLock()
      .withLock(async () => rw.readLock().withLock(async () => 'read', { waitTime: 3_000 }), { owner: 'job-8' });
    expect(read).toBe('read');
    expect(await rw.writeLock().isLocked()).toBe(false);
  });

  it('sibling branches inside it exclude each other on another lock, and that lock is not the owner’s', async () => {
    const outer = c.locks.getLock('explicit-section-outer');
    const other = c.locks.getLock('explicit-section-other');
    let inside = 0;
    let most = 0;
    const owners: string[] = [];
    await outer.withLock(
      () =>
        Promise.all(
          [0, 1, 2].map(() =>
            other.withLock(async () => {
              inside++;
              most = Math.max(most, inside);
              owners.push(...(await c.redis.hkeys(other.keys.lock)));
              await new Promise((resolve) => setTimeout(resolve, 50));
              inside--;
            }),
          ),
        ),
      { owner: 'job-9' },
    );
    expect(most).toBe(1);
    expect(owners).toHaveLength(3);
    expect(owners).not.toContain('job-9');
    expect(new Set(owners).size).toBe(3);
  });

  it('a call from inside with no section of its own (lock()) re-enters too, and unlock() ends that hold', async () => {
    const lock = c.locks.getLock('explicit-section-by-hand');
    await runInLockScope(() =>
      lock.withLock(
        async () => {
          const nested = await lock.lock({ waitTime: 3_000 });
          expect(nested.owner).toBe('job-10');
          expect(nested.holdCount).toBe(2);
          expect(await lock.unlock()).toBe('decremented');
        },
        { owner: 'job-10' },
      ),
    );
    expect(await lock.isLocked()).toBe(false);
  });
});
