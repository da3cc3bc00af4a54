import { LockLostError, MultiLock } from '../../lib';
import { eventually, lockClient, testPrefix, type TestClient } from '../support/engine';

/** MultiLock on paths the happy tests do not take: what it hands over is checked against Redis. */
describe('MultiLock review', () => {
  const prefix = testPrefix();
  let a: TestClient;
  let b: TestClient;

  beforeAll(() => {
    a = lockClient({ keyPrefix: prefix });
    b = lockClient({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('a member whose lease ran out while a later member was awaited is not handed over as held', async () => {
    // 'late-b' (taken second: by key) is held elsewhere for longer than the group's lease.
    const blocker = await b.locks.getLock('late-b').lock({ leaseTime: 30_000 });
    const releasing = new Promise((resolve) => setTimeout(resolve, 2_500)).then(() => blocker.release());
    const multi = new MultiLock([a.locks.getLock('late-a'), a.locks.getLock('late-b')]);
    const handle = await multi.lock({ leaseTime: 1_500, waitTime: 20_000 });
    await releasing;
    try {
      // Handed over: the holder must hold every member, as Redis sees it, and not be told it lost them already.
      expect(handle.signal.aborted).toBe(false);
      expect(await a.redis.exists(`${prefix}:{late-a}`, `${prefix}:{late-b}`)).toBe(2);
    } finally {
      await handle.release();
    }
  }, 30_000);

  it('a member whose client closes while a later member is awaited ends the wait, holding nothing', async () => {
    const closing = lockClient({ keyPrefix: prefix });
    const blocker = await b.locks.getLock('closing-b').lock({ leaseTime: 30_000 });
    const multi = new MultiLock([closing.locks.getLock('closing-a'), a.locks.getLock('closing-b')]);
    const outcome = multi.lock({ waitTime: 20_000 }).then(
      (handle) => handle,
      (error: unknown) => error,
    );
    try {
      await eventually(() => closing.locks.heldLockCount === 1, 5_000); // the first member is held
      await closing.locks.close(); // its hold is given up (LockLostError, closed)
      await blocker.release();
      const result = await outcome;
      // Not handed over (its first member is gone), nor taken again through the closed client.
      expect(result).toBeInstanceOf(LockLostError);
      expect((result as LockLostError).reason).toBe('closed');
      expect(await a.redis.exists(`${prefix}:{closing-a}`, `${prefix}:{closing-b}`)).toBe(0);
    } finally {
      const result = await outcome;
      if (result && typeof result === 'object' && 'release' in result)
        await (result as { release(): Promise<unknown> }).release();
      await closing.redis.quit();
    }
  }, 30_000);
});
