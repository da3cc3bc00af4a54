import type Redis from 'ioredis';
import {
  RENEW_MANY,
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_PASS,
  SEMAPHORE_RELEASE,
  SEMAPHORE_SET_PERMITS,
  SEMAPHORE_STATE,
} from '../../lib/engine/scripts/catalog';
import { semaphoreKeys } from '../../lib/engine/keys';
import { connect, testPrefix } from '../support/engine';

/** The semaphore's Lua scripts called directly on a real Redis, with random keys. */
describe('semaphore lua scripts', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const keys = () => semaphoreKeys(prefix, `s${++n}`);
  type Keys = ReturnType<typeof keys>;
  /** `client` set: a caller that waits if refused (else a single attempt of client 'solo'). */
  const acquire = (
    k: Keys,
    member: string,
    permits: number,
    lease = 5_000,
    limit = 3,
    chained: '0' | '1' = '0',
    client?: string,
  ) =>
    SEMAPHORE_ACQUIRE.run(redis, k, {
      member,
      permits,
      leaseMs: lease,
      configuredLimit: limit,
      publish: 'publish',
      chained,
      clientId: client ?? 'solo',
      waiting: client === undefined ? 'once' : '0',
    });
  const release = (k: Keys, member: string) => SEMAPHORE_RELEASE.run(redis, k, { member, publish: 'publish' });
  const state = (k: Keys, limit = 3) => SEMAPHORE_STATE.run(redis, k, { configuredLimit: limit });
  const setPermits = (k: Keys, permits: number) => SEMAPHORE_SET_PERMITS.run(redis, k, { permits, publish: 'publish' });

  /** Registers waiting process `client` and subscribes to its channel; returns how many messages arrived since. */
  async function messages(k: Keys, client = 'p1') {
    const sub = redis.duplicate();
    let count = 0;
    sub.on('message', () => count++);
    await sub.subscribe(`${k.channel}:${client}`);
    await redis.zadd(k.waiting, Date.now() * 1000, client);
    return {
      count: async () => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return count;
      },
      close: () => sub.quit(),
    };
  }

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  it('semaphore-acquire-5: grants whole acquisitions up to the limit, refuses with the time to the earliest lease end', async () => {
    const k = keys();
    expect(await acquire(k, '2:a', 2, 60_000)).toEqual(['granted', 1, 1]);
    const [status, ms, available] = await acquire(k, '2:b', 2, 5_000);
    expect([status, available]).toEqual(['refused', 1]);
    expect(ms).toBeGreaterThan(50_000);
    expect(await redis.zcard(k.holds)).toBe(1); // refused: nothing taken
    expect(await acquire(k, '1:c', 1)).toEqual(['granted', 2, 0]);
    expect(await state(k)).toEqual([3, 3]);
    // A permits count that disagrees with the member is refused before any write.
    await expect(acquire(k, '2:d', 1)).rejects.toThrow(/BADARG/);
    await expect(acquire(k, '1:e', 1, 0)).rejects.toThrow(/BADARG/);
  });

  it('semaphore-acquire-5: reclaims holds whose lease ended (server time) and wakes waiters for what is left over', async () => {
    const k = keys();
    await acquire(k, '1:long', 1, 60_000); // keeps the set alive: only the short hold's lease ends
    await acquire(k, '2:a', 2, 100);
    const heard = await messages(k);
    try {
      await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await state(k)).toEqual([3, 1]); // the expired hold counts for nothing, even before reclaimed
      expect(await acquire(k, '1:b', 1)).toEqual(['granted', 3, 1]);
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:b', '1:long']);
      expect(await heard.count()).toBe(1);
      // A woken waiter (chained) granted with permits left over passes the wake-up on; a newcomer does not.
      await acquire(k, '1:c', 1, 5_000, 5, '0');
      expect(await heard.count()).toBe(1);
      await release(k, '1:c');
      expect(await heard.count()).toBe(2);
      await acquire(k, '1:d', 1, 5_000, 5, '1');
      expect(await heard.count()).toBe(3);
    } finally {
      await heard.close();
    }
  });

  it('semaphore-release-3: releases once and wakes a waiting process; a repeat or an expired hold reads as not held', async () => {
    const k = keys();
    await acquire(k, '1:a', 1);
    const heard = await messages(k);
    try {
      expect(await release(k, '1:a')).toBe('released');
      expect(await release(k, '1:a')).toBe('not-locked');
      expect(await heard.count()).toBe(1);
      await acquire(k, '1:b', 1, 50);
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(await release(k, '1:b')).toBe('not-locked');
    } finally {
      await heard.close();
    }
  });

  it('semaphore-set-permits-4: the stored limit wins over the configured one; growing wakes waiters', async () => {
    const k = keys();
    await acquire(k, '3:a', 3);
    const heard = await messages(k);
    try {
      expect(await setPermits(k, 2)).toBe(-1);
      expect(await heard.count()).toBe(0);
      expect(await redis.pttl(k.limit)).toBe(-1); // stored without expiry
      expect((await acquire(k, '1:b', 1, 5_000, 10))[0]).toBe('refused'); // the configured 10 does not apply
      expect(await setPermits(k, 5)).toBe(2);
      expect(await heard.count()).toBe(1);
      await expect(setPermits(k, 0)).rejects.toThrow(/BADARG/);
    } finally {
      await heard.close();
    }
  });

  it('semaphore-acquire-5 / semaphore-pass-4: refused waiters register their process; a release wakes only the longest waiting one', async () => {
    const k = keys();
    await acquire(k, '3:a', 3);
    const [p1, p2] = [await messages(k, 'p1'), await messages(k, 'p2')];
    await redis.del(k.waiting);
    try {
      expect((await acquire(k, '1:x', 1, 5_000, 3, '0', 'p1'))[0]).toBe('refused');
      expect((await acquire(k, '1:y', 1, 5_000, 3, '0', 'p2'))[0]).toBe('refused');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p1', 'p2']);
      expect(await release(k, '3:a')).toBe('released');
      expect([await p1.count(), await p2.count()]).toEqual([1, 0]); // one process, not every one
      // p1's waiter is gone: passing on wakes p2 while permits are free
      const pass = (client: string) =>
        SEMAPHORE_PASS.run(redis, k, { clientId: client, configuredLimit: 3, publish: 'publish' });
      expect(await pass('p1')).toBe(true);
      expect([await p1.count(), await p2.count()]).toEqual([1, 1]);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2']);
      // granted: p2 leaves the registry
      expect((await acquire(k, '1:y', 1, 5_000, 3, '1', 'p2'))[0]).toBe('granted');
      expect(await redis.zcard(k.waiting)).toBe(0);
      await expect(pass('')).rejects.toThrow(/BADARG/);
    } finally {
      await p1.close();
      await p2.close();
    }
  });

  it('renew-many-n: renews a live permit with server time, not an expired or foreign one, beside other kinds', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 1_000);
    await acquire(k, '1:b', 1, 50);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const lock = `${prefix}:{renew-lock}`;
    const renewed = await RENEW_MANY.run(
      redis,
      [k.holds, k.holds, k.holds, lock],
      ['permit', 60_000, '1:a', 'permit', 60_000, '1:b', 'permit', 60_000, '1:zz', 'string', 60_000, 'x'],
    );
    expect(renewed).toEqual([1, 0, 0, 0]);
    const [seconds] = await redis.time();
    expect(Number(await redis.zscore(k.holds, '1:a')) - Number(seconds) * 1000).toBeGreaterThan(50_000);
    expect(await redis.pttl(k.holds)).toBeGreaterThan(50_000);
    await expect(RENEW_MANY.run(redis, [k.holds], ['permits', 1_000, '1:a'])).rejects.toThrow(
      /BADARG kind must be hash, string, read or permit/,
    );
  });
});
