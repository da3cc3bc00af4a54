import { RedLock, type LockHandle } from '../../lib';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * extend(leaseTime) on a hold the watchdog renews sets the lease in Redis at once, shorter or not. The
 * watchdog's next round may be further away than that lease: the hold is renewed by itself in time
 * (at half of the lease set), so neither is another client granted the lock while the holder believes
 * it holds it, nor is the holder told of a loss Redis never made.
 */
describe('extend(leaseTime) on a watched hold', () => {
  const prefix = testPrefix();
  // Rounds every 3 s: far later than the 200 ms lease set below.
  const open: TestClient[] = [];
  const client = () => {
    const c = lockClient({ keyPrefix: prefix, watchdogTimeout: 9_000 });
    open.push(c);
    return c;
  };
  let holderClient: TestClient;
  let otherClient: TestClient;
  beforeAll(() => {
    holderClient = client();
    otherClient = client();
  });
  afterAll(() => Promise.all(open.map((c) => c.close())));

  type Kind = 'reentrant' | 'fair' | 'simple' | 'write' | 'read' | 'semaphore';
  const take = (c: TestClient, kind: Kind, name: string, wait: boolean): Promise<LockHandle | null> => {
    const once = { waitTime: 0 };
    switch (kind) {
      case 'reentrant':
        return wait ? c.locks.getLock(name).lock() : c.locks.getLock(name).tryLock(once);
      case 'fair':
        return wait ? c.locks.getFairLock(name).lock() : c.locks.getFairLock(name).tryLock(once);
      case 'simple': {
        const lock = c.locks.getSimpleLock(name, { leaseTime: 'watchdog' });
        return wait ? lock.lock() : lock.tryLock(once);
      }
      case 'write':
      case 'read': {
        // Another client's write lock excludes a read hold as well as a write hold.
        const rw = c.locks.getReadWriteLock(name);
        if (!wait) return rw.writeLock().tryLock(once);
        return kind === 'read' ? rw.readLock().lock() : rw.writeLock().lock();
      }
      case 'semaphore': {
        const semaphore = c.locks.getSemaphore(name, { permits: 1 });
        return wait ? semaphore.acquire() : semaphore.tryAcquire(once);
      }
    }
  };

  it.each<Kind>(['reentrant', 'fair', 'simple', 'write', 'read', 'semaphore'])(
    '%s: set to 500 ms, the hold is renewed in time: no other client gets it and the holder is not told of a loss',
    async (kind) => {
      const name = `watched-extend-${kind}`;
      const holder = (await take(holderClient, kind, name, true))!;
      // Renewed at its half: 250 ms of slack for a busy machine's timers before Redis would let it go.
      await holder.extend(500);
      // Past that lease, and still before the watchdog's next round (every 3 s) as a rule.
      await sleep(1_200);
      const other = await take(otherClient, kind, name, false);
      const state = { otherGranted: other !== null, holderAborted: holder.signal.aborted };
      await other?.release();
      expect(state).toEqual({ otherGranted: false, holderAborted: false });
      expect(await holder.release()).toBe('released');
    },
    20_000,
  );

  it('RedLock: set to 500 ms on every master, each renews in time and the RedLock follows: no loss is told', async () => {
    const masters = sharedTopology('multi').masters.map((m) =>
      lockClient({ port: m.port, keyPrefix: prefix, watchdogTimeout: 9_000 }),
    );
    open.push(...masters);
    const redLock = new RedLock(
      masters.map((c) => c.locks),
      'watched-extend-redlock',
    );
    const holder = await redLock.lock();
    await holder.extend(500);
    await sleep(1_200);
    const pttls = await Promise.all(masters.map((c) => c.redis.pttl(`${prefix}:{watched-extend-redlock}`)));
    expect(holder.signal.aborted).toBe(false);
    expect(pttls.filter((ms) => ms > 1_000).length).toBeGreaterThanOrEqual(3);
    expect(await holder.release()).toBe('released');
  }, 20_000);

  it('a longer lease set on a watched hold is kept, and the watchdog goes on renewing after it', async () => {
    const lock = holderClient.locks.getLock('watched-extend-longer');
    const holder = await lock.lock();
    await holder.extend(60_000);
    expect(await holderClient.redis.pttl(lock.keys.lock)).toBeGreaterThan(30_000);
    await sleep(300); // its own renewal is at half of the 60 s: nothing of it yet
    expect(await holderClient.redis.pttl(lock.keys.lock)).toBeGreaterThan(30_000);
    expect(holder.signal.aborted).toBe(false);
    expect(await holder.release()).toBe('released');
  });
});
