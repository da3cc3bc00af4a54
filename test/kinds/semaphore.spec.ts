import { LockAcquireTimeoutError, LockLostError, LockOptionsError, type LockHandle } from '../../lib';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

describe('Semaphore', () => {
  const prefix = testPrefix();
  let client: TestClient;
  let other: TestClient;
  let name: string;

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix });
    other = lockClient({ keyPrefix: prefix });
  });
  beforeEach(() => (name = `sem-${Math.random().toString(36).slice(2)}`));
  afterAll(async () => {
    await client.close();
    await other.close();
  });

  it('admits N holders; the N+1th is refused by tryAcquire, and a waiter is woken by the release, not a timer', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 3 });
    const held = await Promise.all([1, 2, 3].map(() => semaphore.acquire({ leaseTime: 60_000 })));
    expect(new Set(held.map((h) => h.owner)).size).toBe(3);
    expect(await semaphore.availablePermits()).toBe(0);
    expect(await semaphore.tryAcquire()).toBeNull();
    expect(await other.locks.getSemaphore(name, { permits: 3 }).tryAcquire({ waitTime: 200 })).toBeNull();

    // The holders' leases end in 60 s and the wait in 30 s: only the release's message can wake it.
    const waiting = other.locks.getSemaphore(name, { permits: 3 }).acquire({ waitTime: 30_000 });
    await sleep(500);
    const releasedAt = Date.now();
    expect(await held[1].release()).toBe('released');
    const next = await waiting;
    expect(Date.now() - releasedAt).toBeLessThan(5_000);
    expect(await semaphore.availablePermits()).toBe(0);
    await Promise.all([held[0], held[2], next].map((h) => h.release()));
    expect(await semaphore.availablePermits()).toBe(3);
  });

  it('acquire(n) takes n permits at once or none; a release of several admits several waiters', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 4 });
    const one = await semaphore.acquire({ leaseTime: 60_000 });
    const two = await semaphore.acquire({ permits: 2, leaseTime: 60_000 });
    expect(await semaphore.availablePermits()).toBe(1);
    // 2 of the 1 free: refused, and nothing was taken.
    expect(await semaphore.tryAcquire({ permits: 2 })).toBeNull();
    expect(await semaphore.availablePermits()).toBe(1);
    await expect(semaphore.acquire({ permits: 2, waitTime: 100 })).rejects.toThrow(LockAcquireTimeoutError);
    expect(await semaphore.availablePermits()).toBe(1);

    // Two waiters of one permit each, in another client: the release of the 2-permit hold admits both.
    const others = other.locks.getSemaphore(name, { permits: 4 });
    const extra = await others.acquire({ leaseTime: 60_000 }); // the last free permit
    const waiters = [others.acquire({ waitTime: 30_000 }), others.acquire({ waitTime: 30_000 })];
    await sleep(300);
    const releasedAt = Date.now();
    await two.release();
    const admitted = await Promise.all(waiters);
    expect(Date.now() - releasedAt).toBeLessThan(5_000);
    expect(await semaphore.availablePermits()).toBe(0);
    await Promise.all([one, extra, ...admitted].map((h) => h.release()));
  });

  it('withPermits runs the work holding the permits and releases them however it ends', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 2 });
    const result = await semaphore.withPermits(
      async ({ fencingToken }) => {
        expect(fencingToken).toBeGreaterThan(0);
        expect(await semaphore.availablePermits()).toBe(0);
        return 'done';
      },
      { permits: 2 },
    );
    expect(result).toBe('done');
    await expect(
      semaphore.withPermits(() => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await semaphore.availablePermits()).toBe(2);
  });

  it('setPermits: growing admits waiters at once, for every client; shrinking keeps holders, new ones wait until below it', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 2 });
    const held = [await semaphore.acquire(), await semaphore.acquire()];
    const waiter = other.locks.getSemaphore(name, { permits: 2 }).acquire({ waitTime: 30_000 });
    await sleep(300);
    const grownAt = Date.now();
    await semaphore.setPermits(3);
    const third = await waiter;
    expect(Date.now() - grownAt).toBeLessThan(5_000);
    expect(await other.locks.getSemaphore(name, { permits: 2 }).availablePermits()).toBe(0);

    await semaphore.setPermits(1); // three held, one allowed: nobody loses a permit
    await sleep(200);
    expect([...held, third].map((h) => h.isLost)).toEqual([false, false, false]);
    expect(await semaphore.availablePermits()).toBe(0);
    await held[0].release();
    await held[1].release();
    expect(await semaphore.tryAcquire()).toBeNull(); // still one held, the limit is 1
    await third.release();
    const next = await semaphore.tryAcquire();
    expect(next).not.toBeNull();
    expect(await semaphore.tryAcquire()).toBeNull();
    await next!.release();
  });

  it('an ask above a limit setPermits lowered fails at once with LockOptionsError, whether permits are held or not; nothing waits', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 5 });
    await semaphore.setPermits(2);
    for (const held of [[], [await semaphore.acquire({ leaseTime: 60_000 })]]) {
      const started = Date.now();
      const error = await semaphore.acquire({ permits: 3 }).catch((e: unknown) => e); // no waitTime: would wait forever
      expect(error).toBeInstanceOf(LockOptionsError);
      expect((error as Error).message).toMatch(/limit is 2 now.*setPermits/);
      expect(Date.now() - started).toBeLessThan(2_000);
      await Promise.all(held.map((h) => h.release()));
    }
    // Nothing was registered: the permits are all there, and an ask that fits is granted.
    expect(await semaphore.availablePermits()).toBe(2);
    const fits = await semaphore.acquire({ permits: 2, waitTime: 1_000 });
    await fits.release();
  });

  it("a permit's lease ends without a release (no watchdog): it comes back, and its holder's signal aborts", async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 1 });
    const stale = await semaphore.acquire({ leaseTime: 300 });
    const lost = new Promise<unknown>((resolve) =>
      stale.signal.addEventListener('abort', () => resolve(stale.signal.reason)),
    );
    // Waits for the lease to end: refused with the time until then, so it retries when it does.
    const startedAt = Date.now();
    const next = await other.locks.getSemaphore(name, { permits: 1 }).acquire({ waitTime: 10_000, leaseTime: 60_000 });
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect(await lost).toBeInstanceOf(LockLostError);
    expect(await stale.release()).toBe('expired');
    expect(await semaphore.availablePermits()).toBe(0); // the stale release took nothing from the new holder
    await next.release();
  });

  it('the watchdog renews held permits past their lease; extend renews one explicitly', async () => {
    // A 1.5 s lease, renewed every 0.5 s: with 600 ms a renewal held up over half a second on a loaded
    // machine let Redis free the permits (seen once); the holder is now told at its lease's end.
    const watched = lockClient({ keyPrefix: prefix, watchdogTimeout: 1_500 });
    try {
      const semaphore = watched.locks.getSemaphore(name, { permits: 2 });
      const handle = await semaphore.acquire({ permits: 2 });
      await sleep(3 * 1_500);
      expect(handle.isLost).toBe(false);
      expect(await semaphore.availablePermits()).toBe(0);
      const score = Number(await watched.redis.zscore(semaphore.keys.holds, handle.owner));
      const [seconds] = await watched.redis.time();
      expect(score - Number(seconds) * 1000).toBeGreaterThan(0);
      expect(await watched.redis.pttl(semaphore.keys.holds)).toBeGreaterThan(0);

      const explicit = await client.locks.getSemaphore(name, { permits: 3 }).acquire({ leaseTime: 400 });
      await explicit.extend(5_000);
      await sleep(700);
      expect(explicit.isLost).toBe(false);
      expect(await explicit.release()).toBe('released');
      expect(await handle.release()).toBe('released');
    } finally {
      await watched.close();
    }
  });

  it('a permit taken from its holder (the holds cleared) aborts the signal at the next renewal', async () => {
    const watched = lockClient({ keyPrefix: prefix, watchdogTimeout: 600 });
    try {
      const semaphore = watched.locks.getSemaphore(name, { permits: 1 });
      const handle = await semaphore.acquire();
      await watched.redis.del(semaphore.keys.holds);
      await eventually(() => handle.signal.aborted, 5_000);
      expect(handle.signal.reason).toBeInstanceOf(LockLostError);
      expect((handle.signal.reason as LockLostError).reason).toBe('not-owner');
    } finally {
      await watched.close();
    }
  });

  it('an aborted signal ends a wait without taking a permit', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 1 });
    const held = await semaphore.acquire({ leaseTime: 60_000 });
    const controller = new AbortController();
    const waiting = other.locks.getSemaphore(name, { permits: 1 }).acquire({ signal: controller.signal });
    await sleep(200);
    controller.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
    await held.release();
    expect(await semaphore.availablePermits()).toBe(1);
  });

  it('keeps every key in one hash tag, apart from a lock of the same name; the holds expire with their last lease', async () => {
    const semaphore = client.locks.getSemaphore(name, { permits: 1 });
    const keys = Object.values(semaphore.keys);
    expect(new Set(keys.map((k) => /\{[^}]*\}/.exec(k)![0])).size).toBe(1);
    const lock = await client.locks.getLock(name).lock({ leaseTime: 5_000 });
    const permit = await semaphore.acquire({ leaseTime: 5_000 });
    const pttl = await client.redis.pttl(semaphore.keys.holds);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(5_000);
    await permit.release();
    await lock.release();
  });

  it('bad input raises LockOptionsError naming the semaphore and the option, before any Redis call', async () => {
    const named = (option?: string) => ({ name: 'LockOptionsError', key: name, ...(option ? { option } : {}) });
    const bad = (fn: () => unknown, option?: string) => expect(fn).toThrow(expect.objectContaining(named(option)));
    const rejects = (fn: () => Promise<unknown>, option?: string) => expect(fn()).rejects.toMatchObject(named(option));
    for (const permits of [0, -1, 1.5, NaN, Infinity, '3', undefined, null]) {
      bad(() => client.locks.getSemaphore(name, { permits } as never), 'permits');
    }
    bad(() => client.locks.getSemaphore(name, null as never));
    bad(() => client.locks.getSemaphore(name, { permits: 2, leaseTime: 0 }), 'leaseTime');
    bad(() => client.locks.getSemaphore(name, { permits: 2, leaseTime: 'forever' as never }), 'leaseTime');
    const semaphore = client.locks.getSemaphore(name, { permits: 2 });
    for (const permits of [0, 3, 1.5, -2, NaN, '1']) {
      await rejects(() => semaphore.acquire({ permits: permits as never }), 'permits');
      await rejects(() => semaphore.tryAcquire({ permits: permits as never }), 'permits');
    }
    await rejects(() => semaphore.acquire({ leaseTime: -5 }), 'leaseTime');
    await rejects(() => semaphore.acquire({ leaseTime: NaN }), 'leaseTime');
    await rejects(() => semaphore.tryAcquire({ waitTime: -1 }), 'waitTime');
    await rejects(() => semaphore.withPermits(() => 1, { permits: 5 }), 'permits');
    await rejects(() => semaphore.setPermits(0), 'permits');
    await rejects(() => semaphore.setPermits(2.5), 'permits');
    expect(() => client.locks.getSemaphore('', { permits: 1 })).toThrow(LockOptionsError);
    // Nothing reached Redis: no key of the semaphore exists (setPermits would have stored its limit).
    expect(await client.redis.exists(...Object.values(semaphore.keys))).toBe(0);
  });

  it('the acquisitions of one client are tracked and released by close()', async () => {
    const closing = lockClient({ keyPrefix: prefix });
    const semaphore = closing.locks.getSemaphore(name, { permits: 2 });
    const handles: LockHandle[] = [await semaphore.acquire(), await semaphore.acquire()];
    expect(closing.locks.heldLockCount).toBe(2);
    await closing.close();
    // Given up under their holders: told so first (LockLostError, reason 'closed'), then released.
    expect(handles.map((h) => (h.signal.reason as LockLostError).reason)).toEqual(['closed', 'closed']);
    expect(await client.locks.getSemaphore(name, { permits: 2 }).availablePermits()).toBe(2);
  });
});
