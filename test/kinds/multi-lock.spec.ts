import { MultiLock, runInLockScope, type LockLogger } from '../../lib';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

describe('MultiLock', () => {
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

  it('holds locks of different kinds on different clients all-or-nothing', async () => {
    const multi = new MultiLock([a.locks.getLock('m1'), b.locks.getFairLock('m2'), a.locks.getSimpleLock('m3')]);
    const handle = await multi.lock();
    expect(handle.fencingTokens.every((t) => typeof t === 'number')).toBe(true);
    expect(await a.redis.exists(`${prefix}:{m1}`, `${prefix}:{m2}`, `${prefix}:{m3}`)).toBe(3);
    expect(await handle.release()).toBe('released');
    expect(await a.redis.exists(`${prefix}:{m1}`, `${prefix}:{m2}`, `${prefix}:{m3}`)).toBe(0);
  });

  it('releases a partial acquisition at once when one member is taken', async () => {
    const blocker = await b.locks.getLock('p3').lock({ leaseTime: 10_000 });
    const multi = new MultiLock([a.locks.getLock('p1'), a.locks.getLock('p2'), a.locks.getLock('p3')]);
    expect(await runInLockScope(() => multi.tryLock({ waitTime: 200 }), { newScope: true })).toBeNull();
    expect(await a.redis.exists(`${prefix}:{p1}`, `${prefix}:{p2}`)).toBe(0);
    await blocker.release();
  });

  it('two MultiLocks over the same locks in opposite order do not deadlock', async () => {
    const x = () => a.locks.getLock('d1');
    const y = () => b.locks.getLock('d2');
    let inside = 0;
    let maxInside = 0;
    const run = (locks: ReturnType<typeof x>[]) =>
      new MultiLock(locks).withLock(async () => {
        maxInside = Math.max(maxInside, ++inside);
        await sleep(5);
        inside--;
      });
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? run([x(), y()]) : run([y(), x()]))));
    expect(maxInside).toBe(1);
  }, 30_000);

  it('its signal aborts when any member is lost', async () => {
    const multi = new MultiLock([a.locks.getLock('s1'), a.locks.getLock('s2')]);
    const handle = await multi.lock({ leaseTime: 300 });
    await sleep(600);
    expect(handle.signal.aborted).toBe(true);
    expect(await handle.release()).toBe('expired');
  });

  it('withLock logs a failed release, naming the group, and returns or throws what the work did', async () => {
    const warnings: string[] = [];
    const logger: LockLogger = { warn: (message) => warnings.push(message), error: () => undefined };
    // Its own connection: closed inside the work, so the release after it cannot reach Redis.
    const closing = () => lockClient({ keyPrefix: prefix, logger });
    const clients = [closing(), closing()];
    try {
      const [first, second] = clients;
      const group = (n: string) => new MultiLock([first.locks.getLock(`${n}1`), first.locks.getLock(`${n}2`)]);

      const result = await group('rf').withLock(
        async () => {
          await first.redis.quit();
          return 'the work';
        },
        { leaseTime: 2_000 },
      );
      expect(result).toBe('the work');
      expect(warnings).toEqual([expect.stringMatching(/^Could not release lock "rf1\+rf2": /)]);

      const failure = new Error('the work failed');
      const secondGroup = new MultiLock([second.locks.getLock('rg1'), second.locks.getLock('rg2')]);
      await expect(
        secondGroup.withLock(
          async () => {
            await second.redis.quit();
            throw failure;
          },
          { leaseTime: 2_000 },
        ),
      ).rejects.toBe(failure);
      expect(warnings[1]).toMatch(/^Could not release lock "rg1\+rg2" after a failure: /);
      expect(warnings).toHaveLength(2);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
});
