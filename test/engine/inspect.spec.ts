import { LockOptionsError, runInLockScope } from '../../lib';
import { eventually, lockClient, testPrefix, type TestClient } from '../support/engine';

/** inspect(name): what Redis holds for a lock, checked against what the test did to it. */
describe('LockClient.inspect', () => {
  const prefix = testPrefix();
  let a: TestClient;
  let b: TestClient;
  let n = 0;
  let name: string;

  beforeAll(() => {
    a = lockClient({ keyPrefix: prefix });
    b = lockClient({ keyPrefix: prefix });
  });
  beforeEach(() => (name = `inspect-${++n}`));
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('a free lock: no holders, no lease, no token yet', async () => {
    expect(await a.locks.inspect(name)).toEqual({
      name,
      key: a.locks.getLock(name).keys.lock,
      state: 'free',
      holdKind: undefined,
      holders: [],
      remainingLeaseMs: null,
      fencingToken: null,
      queue: [],
      waitingClients: [],
    });
  });

  it('a reentrant lock held twice, with another process waiting', async () => {
    const lock = a.locks.getLock(name);
    await runInLockScope(async () => {
      const outer = await lock.lock({ leaseTime: 20_000 });
      const inner = await lock.lock({ leaseTime: 20_000 });
      const waiting = b.locks.getLock(name).lock({ waitTime: 10_000 });
      await eventually(async () => (await a.locks.inspect(name)).waitingClients.length === 1);
      const seen = await a.locks.inspect(name);
      expect(seen.state).toBe('held');
      expect(seen.holdKind).toBe('counted');
      expect(seen.holders).toEqual([{ owner: outer.owner, holdCount: 2 }]);
      expect(seen.remainingLeaseMs).toBeGreaterThan(10_000);
      expect(seen.remainingLeaseMs).toBeLessThanOrEqual(20_000);
      expect(seen.fencingToken).toBe(outer.fencingToken);
      expect(seen.waitingClients).toEqual([b.locks.clientId]);
      await inner.release();
      expect((await a.locks.inspect(name)).holders).toEqual([{ owner: outer.owner, holdCount: 1 }]);
      await outer.release();
      const next = await waiting;
      expect((await a.locks.inspect(name)).holders).toEqual([{ owner: next.owner, holdCount: 1 }]);
      expect((await a.locks.inspect(name)).fencingToken).toBe(next.fencingToken);
      await next.release();
    });
    const after = await a.locks.inspect(name);
    expect(after.state).toBe('free');
    expect(after.waitingClients).toEqual([]);
  });

  it('a fair lock: the queue in FIFO order with each waiter deadline', async () => {
    const options = { staleWaiterTimeout: 6_000 };
    const holder = await a.locks.getFairLock(name, options).lock();
    const first = runInLockScope(() => b.locks.getFairLock(name, options).lock({ waitTime: 10_000 }), {
      newScope: true,
    });
    await eventually(async () => (await a.locks.inspect(name)).queue.length === 1);
    const second = runInLockScope(() => b.locks.getFairLock(name, options).lock({ waitTime: 10_000 }), {
      newScope: true,
    });
    await eventually(async () => (await a.locks.inspect(name)).queue.length === 2);
    const seen = await a.locks.inspect(name);
    expect(seen.holders).toEqual([{ owner: holder.owner, holdCount: 1 }]);
    for (const waiter of seen.queue) {
      expect(waiter.waiterId.startsWith(`${b.locks.clientId}:`)).toBe(true);
      expect(waiter.expiresInMs).toBeGreaterThan(0);
      expect(waiter.expiresInMs).toBeLessThanOrEqual(6_000);
    }
    await holder.release();
    const firstHandle = await first;
    // The head of the queue was the one that got it.
    expect(firstHandle.owner).toBe(seen.queue[0].owner);
    await firstHandle.release();
    await (await second).release();
    expect((await a.locks.inspect(name)).queue).toEqual([]);
  });

  it('a simple lock: its token, counted once', async () => {
    const handle = await a.locks.getSimpleLock(name, { leaseTime: 5_000 }).lock();
    const seen = await a.locks.inspect(name);
    expect(seen.holdKind).toBe('token');
    expect(seen.holders).toEqual([{ owner: handle.owner, holdCount: 1 }]);
    expect(seen.remainingLeaseMs).toBeLessThanOrEqual(5_000);
    await handle.release();
    expect((await a.locks.inspect(name)).state).toBe('free');
  });

  it('a bad name is a LockOptionsError before any Redis call', async () => {
    await expect(a.locks.inspect('')).rejects.toBeInstanceOf(LockOptionsError);
  });
});
