import {
  LockAcquireTimeoutError,
  LockLostError,
  LockNotHeldError,
  LockOptionsError,
  runInLockScope,
  type LockClient,
} from '../../lib';
import { engineOf } from '../../lib/internal';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

describe('ReentrantLock on a single Redis', () => {
  let client: TestClient;
  let locks: LockClient;
  let name: string;
  const prefix = testPrefix();

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix, watchdogTimeout: 1500 });
    locks = client.locks;
  });
  afterAll(() => client.close());
  beforeEach(() => (name = `lock-${Math.random().toString(36).slice(2)}`));

  it('stores a hash of owner -> hold count with the lease as PEXPIRE', async () => {
    const lock = locks.getLock(name);
    const handle = await lock.lock({ leaseTime: 10_000 });
    const hash = await client.redis.hgetall(lock.keys.lock);
    expect(hash).toEqual({ [handle.owner]: '1' });
    const pttl = await client.redis.pttl(lock.keys.lock);
    expect(pttl).toBeGreaterThan(8_000);
    expect(pttl).toBeLessThanOrEqual(10_000);
    expect(lock.keys.lock).toBe(`${prefix}:{${name}}`);
    await handle.release();
  });

  it('a recently used name gets its lock object back; past 1,024 other names a new one, on the same keys', async () => {
    const first = locks.getLock(name);
    expect(locks.getLock(name)).toBe(first);
    expect(locks.getSimpleLock(name)).toBe(locks.getSimpleLock(name));
    expect(locks.getFairLock(name)).toBe(locks.getFairLock(name));
    // Options make a lock object of their own.
    expect(locks.getSimpleLock(name, { leaseTime: 5_000 })).not.toBe(locks.getSimpleLock(name));
    for (let i = 0; i < 1_024; i++) locks.getLock(`${name}-${i}`);
    const later = locks.getLock(name);
    expect(later).not.toBe(first);
    const handle = await first.lock();
    expect(await later.tryLock()).toBeNull(); // another owner, the same lock
    await handle.release();
  });

  it('re-enters within one scope, counts holds and releases on the last unlock', async () => {
    const lock = locks.getLock(name);
    await runInLockScope(async () => {
      const outer = await lock.lock();
      const inner = await lock.lock();
      expect(inner.owner).toBe(outer.owner);
      expect(inner.fencingToken).toBe(outer.fencingToken);
      expect(await lock.getHoldCount()).toBe(2);
      expect(await lock.isHeldByCurrentScope()).toBe(true);
      expect(await inner.release()).toBe('decremented');
      expect(await lock.getHoldCount()).toBe(1);
      expect(await lock.isLocked()).toBe(true);
      expect(await lock.unlock()).toBe('released');
      expect(await lock.isLocked()).toBe(false);
      expect(await client.redis.exists(lock.keys.lock)).toBe(0);
    });
  });

  it('nested withLock calls in one async chain re-enter instead of deadlocking', async () => {
    const lock = locks.getLock(name);
    const depth = await lock.withLock(() =>
      lock.withLock(() => lock.withLock(async () => lock.getHoldCount()), { waitTime: 100 }),
    );
    expect(depth).toBe(3);
    expect(await lock.isLocked()).toBe(false);
  });

  it('two concurrent scopes in one process are different owners and exclude each other', async () => {
    const lock = locks.getLock(name);
    const events: string[] = [];
    const first = lock.withLock(async () => {
      events.push('a-in');
      await sleep(150);
      events.push('a-out');
    });
    await sleep(20);
    const second = lock.withLock(async () => {
      events.push('b-in');
    });
    await Promise.all([first, second]);
    expect(events).toEqual(['a-in', 'a-out', 'b-in']);
  });

  it('unlock by a non-owner throws LockNotHeldError and changes nothing', async () => {
    const lock = locks.getLock(name);
    const handle = await lock.lock({ leaseTime: 5_000 });
    const before = await client.redis.hgetall(lock.keys.lock);
    await runInLockScope(async () => {
      const error = await lock.unlock().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockNotHeldError);
      expect((error as LockNotHeldError).name).toBe('LockNotHeldError');
      expect((error as LockNotHeldError).key).toBe(name);
    });
    await expect(lock.unlock({ owner: 'somebody-else' })).rejects.toBeInstanceOf(LockNotHeldError);
    await expect(lock.unlock()).rejects.toBeInstanceOf(LockNotHeldError); // outside any scope
    expect(await client.redis.hgetall(lock.keys.lock)).toEqual(before);
    await handle.release();
  });

  it('an explicit owner acquires in one place and releases in another', async () => {
    const lock = locks.getLock(name);
    await lock.lock({ owner: 'job-42', leaseTime: 5_000 });
    expect(await lock.getHoldCount('job-42')).toBe(1);
    expect(await lock.tryLock()).toBeNull();
    expect(await lock.unlock({ owner: 'job-42' })).toBe('released');
  });

  it('an explicit lease expires by itself and the holder learns it through its signal', async () => {
    const lock = locks.getLock(name);
    const handle = await lock.lock({ leaseTime: 300 });
    const lost = new Promise<unknown>((resolve) =>
      handle.signal.addEventListener('abort', () => resolve(handle.signal.reason)),
    );
    await eventually(async () => !(await lock.isLocked()), 5_000);
    const reason = await lost;
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('lease-expired');
    const other = await lock.tryLock({ leaseTime: 1_000 });
    expect(other).not.toBeNull();
    expect(await handle.release()).toBe('expired'); // no throw, no retry loop
    await other!.release();
  });

  it('releasing after the lease ran out (and someone else took it) says expired and leaves the new holder alone', async () => {
    const lock = locks.getLock(name);
    const handle = await lock.lock({ leaseTime: 200 });
    await sleep(350);
    const next = await lock.lock({ leaseTime: 5_000 });
    expect(await handle.release()).toBe('expired');
    expect(await lock.getHoldCount(next.owner)).toBe(1);
    await next.release();
  });

  it('forceUnlock deletes the lock whoever holds it and wakes waiters', async () => {
    const lock = locks.getLock(name);
    await lock.lock({ leaseTime: 60_000 });
    const started = Date.now();
    const waiter = lock.lock({ leaseTime: 1_000 });
    await sleep(100);
    expect(await lock.forceUnlock()).toBe(true);
    const handle = await waiter;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await lock.forceUnlock()).toBe(true);
    expect(await lock.forceUnlock()).toBe(false);
    expect(await handle.release()).toBe('expired');
  });

  it('tryLock with waitTime 0 makes one attempt; with a waitTime it gives up with null', async () => {
    const lock = locks.getLock(name);
    const handle = await lock.lock({ leaseTime: 5_000 });
    expect(await lock.tryLock()).toBeNull();
    const started = Date.now();
    expect(await lock.tryLock({ waitTime: 300 })).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await expect(lock.lock({ waitTime: 100 })).rejects.toBeInstanceOf(LockAcquireTimeoutError);
    await expect(lock.withLock(() => 1, { waitTime: 100 })).rejects.toBeInstanceOf(LockAcquireTimeoutError);
    await handle.release();
    await eventually(() => engineOf(locks).waiters.channelCount === 0, 5_000); // unsubscribed a little after no one waits
  });

  it('withLock releases when the work throws, and the error comes out unchanged', async () => {
    const lock = locks.getLock(name);
    const failure = new Error('boom');
    await expect(lock.withLock(async () => Promise.reject(failure))).rejects.toBe(failure);
    expect(await lock.isLocked()).toBe(false);
  });

  it('an aborted signal stops a waiter', async () => {
    const lock = locks.getLock(name);
    const handle = await lock.lock({ leaseTime: 5_000 });
    const controller = new AbortController();
    const waiting = lock.lock({ signal: controller.signal });
    await sleep(50);
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    await handle.release();
  });

  it('fencing tokens grow strictly with every first acquisition, not with re-entry', async () => {
    const lock = locks.getLock(name);
    const tokens: number[] = [];
    for (let i = 0; i < 5; i++) {
      await lock.withLock(async ({ fencingToken }) => {
        tokens.push(fencingToken);
        await lock.withLock(async (inner) => expect(inner.fencingToken).toBe(fencingToken));
      });
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('200 concurrent withLock calls on one key increment a racy counter exactly', async () => {
    const lock = locks.getLock(name);
    const counter = `${prefix}:counter:${name}`;
    await Promise.all(
      Array.from({ length: 200 }, () =>
        lock.withLock(async () => {
          const value = Number(await client.redis.get(counter));
          await sleep(0);
          await client.redis.set(counter, String(value + 1));
        }),
      ),
    );
    expect(await client.redis.get(counter)).toBe('200');
    expect(await lock.isLocked()).toBe(false);
    await eventually(() => engineOf(locks).waiters.channelCount === 0, 5_000);
  });

  describe('bad input gets LockOptionsError before any Redis call', () => {
    const cases: [string, () => unknown][] = [
      ['empty name', () => locks.getLock('')],
      ['name over 1 KiB', () => locks.getLock('x'.repeat(1025))],
      ['non-string name', () => locks.getLock(42 as unknown as string)],
      ['negative leaseTime', () => locks.getLock('k').lock({ leaseTime: -1 })],
      ['zero leaseTime', () => locks.getLock('k').lock({ leaseTime: 0 })],
      ['NaN leaseTime', () => locks.getLock('k').tryLock({ leaseTime: NaN })],
      ['infinite waitTime', () => locks.getLock('k').tryLock({ waitTime: Infinity })],
      ['negative waitTime', () => locks.getLock('k').withLock(() => 1, { waitTime: -5 })],
      ['string waitTime', () => locks.getLock('k').tryLock({ waitTime: '10' as unknown as number })],
    ];
    it.each(cases)('%s', async (_label, call) => {
      const sent = jest.spyOn(client.redis, 'sendCommand');
      let error: unknown;
      let commandsSent = -1;
      try {
        await call();
      } catch (e) {
        error = e;
      } finally {
        commandsSent = sent.mock.calls.length;
        sent.mockRestore();
      }
      expect(error).toBeInstanceOf(LockOptionsError);
      expect((error as Error).name).toBe('LockOptionsError');
      expect(commandsSent).toBe(0);
    });
  });
});
