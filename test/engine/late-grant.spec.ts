import { LockOptionsError, type LockHandle } from '../../lib';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { connect, eventually, lockClient, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * A grant whose reply comes after the lease it would be believed for has ended (a slow network, a
 * short leaseTime): Redis may have let it run out and granted the lock to another client already. It is
 * never handed out: lock() waits on (and gets a grant of its own in time), tryLock() with no wait says no,
 * and the late hold is taken back, so nothing of it is left.
 */
describe('a grant whose reply comes after its lease', () => {
  const prefix = testPrefix();
  const redis = connect();
  let proxy: ReplyDroppingProxy;
  let slow: TestClient;
  let fast: TestClient;

  beforeAll(async () => {
    proxy = await ReplyDroppingProxy.start({ host: '127.0.0.1', port: singlePort() });
    slow = lockClient({ keyPrefix: prefix, port: proxy.port });
    fast = lockClient({ keyPrefix: prefix });
    // Connected, subscribed and scripts loaded before the replies slow down.
    for (const c of [slow, fast]) {
      await (await c.locks.getLock('warm-up').lock({ leaseTime: 5_000 })).release();
      await (await c.locks.getFairLock('warm-up').lock({ leaseTime: 5_000 })).release();
    }
  });
  afterAll(async () => {
    proxy.delayReplies(0);
    await Promise.all([slow.close(), fast.close()]);
    await proxy.close();
    redis.disconnect();
  });

  const lockOf = (c: TestClient, kind: 'reentrant' | 'fair', name: string) =>
    kind === 'fair' ? c.locks.getFairLock(name) : c.locks.getLock(name);

  it.each(['reentrant', 'fair'] as const)(
    '%s: lock() does not resolve with the late grant while another client holds the lock, and gets it after',
    async (kind) => {
      const name = `late-${kind}`;
      proxy.delayReplies(300);
      let resolved: LockHandle | undefined;
      const pending = lockOf(slow, kind, name)
        .lock({ leaseTime: 50, waitTime: 20_000 })
        .then((h) => (resolved = h));
      // The slow client's grant lands (its hold's record is there for longer than its lease)…
      await eventually(async () => (await redis.exists(lockOf(slow, kind, name).keys.grants)) === 1, 5_000, 5);
      // …and its 50 ms lease runs out while the reply is on the way: another client takes the lock.
      let other: LockHandle | null = null;
      await eventually(async () => (other = await lockOf(fast, kind, name).tryLock({ waitTime: 0 })) !== null, 5_000);
      // Well past the late reply: the slow caller still waits, it does not believe it holds the lock.
      await sleep(1_500);
      expect(resolved).toBeUndefined();
      proxy.delayReplies(0);
      expect(await other!.release()).toBe('released');
      const handle = await pending;
      // A grant of its own, after the other client's, live in Redis under its owner.
      expect(handle.signal.aborted).toBe(false);
      expect(handle.fencingToken).toBeGreaterThan(other!.fencingToken);
      expect(await redis.hexists(lockOf(slow, kind, name).keys.lock, handle.owner)).toBe(1);
      expect(await handle.release()).toBe('released');
    },
    30_000,
  );

  it('lock() with no waitTime whose every grant comes after its lease fails with LockOptionsError (leaseTime) instead of trying for ever', async () => {
    const lock = slow.locks.getLock('late-never');
    proxy.delayReplies(300);
    try {
      const outcome = lock.lock({ leaseTime: 50 }).catch((e: unknown) => e);
      const result = await Promise.race([outcome, sleep(15_000).then(() => 'still trying')]);
      expect(result).toBeInstanceOf(LockOptionsError);
      expect(result).toMatchObject({ name: 'LockOptionsError', key: 'late-never', option: 'leaseTime', value: 50 });
    } finally {
      proxy.delayReplies(0);
    }
    await eventually(async () => (await redis.exists(lock.keys.lock)) === 0, 5_000);
  }, 30_000);

  it('a lease the drift margin takes whole is refused before Redis is asked: no grant of it could be believed', async () => {
    const lock = fast.locks.getLock('late-hopeless');
    for (const leaseTime of [1, 2, 1.5]) {
      const error = await lock.lock({ leaseTime }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect(error).toMatchObject({
        name: 'LockOptionsError',
        key: 'late-hopeless',
        option: 'leaseTime',
        value: leaseTime,
      });
    }
    expect(await redis.exists(lock.keys.lock, lock.keys.fence, lock.keys.grants)).toBe(0);
    const shortest = await lock.lock({ leaseTime: 3 }).catch((e: unknown) => e);
    expect(shortest).not.toBeInstanceOf(LockOptionsError);
  });

  it.each(['reentrant', 'fair'] as const)(
    '%s: tryLock() with no wait whose grant comes late says no, and the late hold is taken back',
    async (kind) => {
      const name = `late-once-${kind}`;
      const lock = lockOf(slow, kind, name);
      proxy.delayReplies(300);
      try {
        // A lease longer than the delay is granted as ever: the rule is the lease, not the delay.
        const timely = await lock.tryLock({ waitTime: 0, leaseTime: 5_000 });
        expect(timely).not.toBeNull();
        expect(await timely!.release()).toBe('released');
        expect(await lock.tryLock({ waitTime: 0, leaseTime: 50 })).toBeNull();
      } finally {
        proxy.delayReplies(0);
      }
      // Nothing of the late grant stays behind.
      await eventually(async () => (await redis.exists(lock.keys.lock)) === 0, 5_000);
      const next = await lockOf(fast, kind, name).tryLock({ waitTime: 0 });
      expect(next).not.toBeNull();
      expect(await next!.release()).toBe('released');
    },
    30_000,
  );
});

/**
 * The same, when the late grant is still live in Redis as its reply comes (inside the holder's drift
 * margin, made wide here): a semaphore wait's next attempt sends the same member, and takes the permits
 * that member still holds as its own, instead of being refused as a copy of a finished acquisition.
 */
describe('a semaphore grant whose reply comes after its lease, still live in Redis', () => {
  const prefix = testPrefix();
  const redis = connect();
  let proxy: ReplyDroppingProxy;
  let slow: TestClient;

  beforeAll(async () => {
    proxy = await ReplyDroppingProxy.start({ host: '127.0.0.1', port: singlePort() });
    // Half of each lease is given up to drift: a reply 700 ms late is too late for a 1 s lease Redis still holds.
    slow = lockClient({ keyPrefix: prefix, port: proxy.port, driftFactor: 0.5 });
    await (await slow.locks.getSemaphore('warm-up', { permits: 2 }).acquire({ leaseTime: 5_000 })).release();
  });
  afterAll(async () => {
    proxy.delayReplies(0);
    await slow.close();
    await proxy.close();
    redis.disconnect();
  });

  it('the wait goes on and gets the free permits within its waitTime', async () => {
    const semaphore = slow.locks.getSemaphore('late-live', { permits: 2 });
    proxy.delayReplies(700);
    const outcome = semaphore.tryAcquire({ waitTime: 2_500, leaseTime: 1_000 });
    // Granted in Redis; its reply is on the way, late. The next attempts are answered at once.
    await eventually(async () => (await redis.exists(semaphore.keys.holds)) === 1, 5_000, 2);
    proxy.delayReplies(0);
    const handle = await outcome;
    expect(handle).not.toBeNull();
    expect(handle!.signal.aborted).toBe(false);
    expect(await redis.zrange(semaphore.keys.holds, 0, -1)).toEqual([handle!.owner]);
    expect(await handle!.release()).toBe('released');
  }, 30_000);
});
