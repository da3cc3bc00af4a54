import type Redis from 'ioredis';
import {
  RENEW_MANY,
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_PASS,
  SEMAPHORE_RELEASE,
  SEMAPHORE_SET_PERMITS,
  SEMAPHORE_STATE,
} from '../../lib/engine/scripts/catalog';
import { permitKeys } from '../../lib/engine/kinds/permit-lock';
import { connect, testPrefix } from '../support/engine';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import { FENCE_SEED, seedFence } from '../support/fencing';

/** The semaphore's Lua scripts called directly on a real Redis, with random keys. */
describe('semaphore lua scripts', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const keys = () => permitKeys(prefix, `s${++n}`);
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
      idleKeyTtl: IDLE_KEY_TTL,
      member,
      permits,
      leaseMs: lease,
      configuredLimit: limit,
      publish: 'publish',
      chained,
      clientId: client ?? 'solo',
      waiting: client === undefined ? 'once' : '0',
    });
  const release = (k: Keys, member: string, limit = 3, memoryMs = 5_000) =>
    SEMAPHORE_RELEASE.run(redis, k, { member, configuredLimit: limit, publish: 'publish', memoryMs });
  const pass = (k: Keys, client: string, permits: number, limit = 3) =>
    SEMAPHORE_PASS.run(redis, k, { clientId: client, permits, configuredLimit: limit, publish: 'publish' });
  const state = (k: Keys, limit = 3) => SEMAPHORE_STATE.run(redis, k, { configuredLimit: limit });
  const setPermits = (k: Keys, permits: number) =>
    SEMAPHORE_SET_PERMITS.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, permits, publish: 'publish' });

  /**
   * Registers the waiters of process `client` for `permits` permits and subscribes to their channel;
   * returns how many messages arrived since.
   */
  // Registration order as the scripts keep it (µs): two helpers in one ms must not tie (a tie sorts by name).
  let lastScore = 0;
  async function messages(k: Keys, client = 'p1', permits = 1) {
    const sub = redis.duplicate();
    let count = 0;
    sub.on('message', () => count++);
    await sub.subscribe(`${k.channel}:${permits}:${client}`);
    lastScore = Math.max(Date.now() * 1000, lastScore + 1);
    await redis.zadd(k.waiting, lastScore, `${permits}:${client}`);
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
    await seedFence(redis, k.fence);
    expect(await acquire(k, '2:a', 2, 60_000)).toEqual(['granted', FENCE_SEED + 1, 1]);
    const [status, ms, available] = await acquire(k, '2:b', 2, 5_000);
    expect([status, available]).toEqual(['refused', 1]);
    expect(ms).toBeGreaterThan(50_000);
    expect(await redis.zcard(k.holds)).toBe(1); // refused: nothing taken
    expect(await acquire(k, '1:c', 1)).toEqual(['granted', FENCE_SEED + 2, 0]);
    expect(await state(k)).toEqual([3, 3]);
    // A permits count that disagrees with the member is refused before any write.
    await expect(acquire(k, '2:d', 1)).rejects.toThrow(/BADARG/);
    await expect(acquire(k, '1:e', 1, 0)).rejects.toThrow(/BADARG/);
  });

  it('semaphore-acquire-5: reclaims holds whose lease ended (server time) and wakes waiters for what is left over', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    await acquire(k, '1:long', 1, 60_000); // keeps the set alive: only the short hold's lease ends
    await acquire(k, '2:a', 2, 100);
    const heard = await messages(k);
    try {
      await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await state(k)).toEqual([3, 1]); // the expired hold counts for nothing, even before reclaimed
      expect(await acquire(k, '1:b', 1)).toEqual(['granted', FENCE_SEED + 3, 1]);
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

  it('semaphore-release-5: releases once and wakes a waiting group; a repeat replies as the first run while remembered', async () => {
    const k = keys();
    await Promise.all(['1:a', '1:b', '1:x'].map((member) => acquire(k, member, 1)));
    const heard = await messages(k);
    try {
      expect(await release(k, '1:x', 3, 5_000)).toBe('released');
      expect(await release(k, '1:a', 3, 200)).toBe('released');
      expect(await heard.count()).toBe(2);
      // The same release sent again (a lost reply): what the first run did, and nothing more.
      expect(await release(k, '1:a', 3, 200)).toBe('released');
      expect(await heard.count()).toBe(2);
      expect(await state(k)).toEqual([3, 1]);
      await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await release(k, '1:a')).toBe('not-locked'); // no longer remembered
      // A hold that was never released here is not remembered: an expired one reads as not held.
      await acquire(k, '1:c', 1, 50);
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(await release(k, '1:c')).toBe('not-locked');
      expect(await release(k, '1:b', 3, 5_000)).toBe('released');
      expect(await redis.zrange(k.released, 0, -1)).toEqual(['1:x', '1:b']); // one whose memory ended is gone
      expect(await redis.pttl(k.released)).toBeGreaterThan(4_000);
      await expect(release(k, '1:b', 3, 0)).rejects.toThrow(/BADARG memory/);
      await expect(release(k, '1:b', 0)).rejects.toThrow(/BADARG limit/);
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
      // Stored as long as the longest hold, and the idle key TTL after (see fencing.lua).
      const limitTtl = await redis.pttl(k.limit);
      expect(limitTtl).toBeGreaterThan(IDLE_KEY_TTL);
      expect(limitTtl).toBeLessThanOrEqual(IDLE_KEY_TTL + 5_000);
      expect((await acquire(k, '1:b', 1, 5_000, 10))[0]).toBe('refused'); // the configured 10 does not apply
      expect(await setPermits(k, 5)).toBe(2);
      expect(await heard.count()).toBe(1);
      await expect(setPermits(k, 0)).rejects.toThrow(/BADARG/);
    } finally {
      await heard.close();
    }
  });

  it('semaphore-acquire-5 / semaphore-pass-4: refused waiters register their group; a release wakes only the longest waiting one', async () => {
    const k = keys();
    await acquire(k, '3:a', 3);
    const [p1, p2] = [await messages(k, 'p1'), await messages(k, 'p2')];
    await redis.del(k.waiting);
    try {
      expect((await acquire(k, '1:x', 1, 5_000, 3, '0', 'p1'))[0]).toBe('refused');
      expect((await acquire(k, '1:y', 1, 5_000, 3, '0', 'p2'))[0]).toBe('refused');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['1:p1', '1:p2']);
      expect(await release(k, '3:a')).toBe('released');
      expect([await p1.count(), await p2.count()]).toEqual([1, 0]); // one process, not every one
      // p1's waiter is gone: passing on wakes p2 while permits are free
      expect(await pass(k, 'p1', 1)).toBe(true);
      expect([await p1.count(), await p2.count()]).toEqual([1, 1]);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['1:p2']);
      // granted: p2 leaves the registry
      expect((await acquire(k, '1:y', 1, 5_000, 3, '1', 'p2'))[0]).toBe('granted');
      expect(await redis.zcard(k.waiting)).toBe(0);
      await expect(pass(k, '', 1)).rejects.toThrow(/BADARG client/);
      await expect(pass(k, 'p1', 0)).rejects.toThrow(/BADARG permits/);
    } finally {
      await p1.close();
      await p2.close();
    }
  });

  it('semaphore-waiting: permits coming free wake the longest-waiting group that can take them, skipping one that wants more', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    await acquire(k, '3:a', 3, 60_000, 5);
    await acquire(k, '2:b', 2, 60_000, 5);
    // Process p1 waits for 3 (registered first), p2 for 1, and p1 for 1 as well.
    const [p1three, p2one, p1one] = [
      await messages(k, 'p1', 3),
      await messages(k, 'p2', 1),
      await messages(k, 'p1', 1),
    ];
    const counts = async () => [await p1three.count(), await p2one.count(), await p1one.count()];
    try {
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['3:p1', '1:p2', '1:p1']);
      expect(await release(k, '2:b', 5)).toBe('released'); // 2 free: the 3-permit group cannot take them
      expect(await counts()).toEqual([0, 1, 0]);
      // The woken group's waiter was beaten to them: refused with 1 still free, it passes the wake-up on.
      expect(await acquire(k, '1:n', 1, 60_000, 5)).toEqual(['granted', FENCE_SEED + 3, 1]); // a newcomer: no pass-on
      expect(await counts()).toEqual([0, 1, 0]);
      expect(await acquire(k, '2:w', 2, 5_000, 5, '1', 'p2')).toEqual(['refused', expect.any(Number), 1]);
      expect(await counts()).toEqual([0, 2, 0]); // '1:p2' is still the longest-waiting group that fits
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['3:p1', '1:p2', '1:p1', '2:p2']);
      expect(await pass(k, 'p2', 1, 5)).toBe(true); // p2's 1-permit waiters left
      expect(await counts()).toEqual([0, 2, 1]); // the next group that fits, in p1
      // A refusal of a caller not refused before passes nothing on.
      expect((await acquire(k, '3:z', 3, 5_000, 5, '0', 'p3'))[0]).toBe('refused');
      expect(await counts()).toEqual([0, 2, 1]);
      // Enough for 3 once the 3-permit hold goes: the group that waited longest is woken.
      expect(await release(k, '3:a', 5)).toBe('released');
      expect(await counts()).toEqual([1, 2, 1]);
      // A group nobody listens for is dropped, and the next one that fits is woken.
      await p1three.close();
      expect(await setPermits(k, 6)).toBe(5);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['1:p1', '2:p2', '3:p3']);
      expect([await p2one.count(), await p1one.count()]).toEqual([2, 2]);
    } finally {
      await Promise.all([p1three, p2one, p1one].map((p) => p.close().catch(() => undefined)));
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
      [...[1, 2, 3].flatMap(() => [k.holds, k.fence, k.limit]), lock, `${lock}:fence`],
      [IDLE_KEY_TTL, 'permit', 60_000, '1:a', 'permit', 60_000, '1:b', 'permit', 60_000, '1:zz', 'string', 60_000, 'x'],
    );
    expect(renewed).toEqual([1, 0, 0, 0]);
    const [seconds] = await redis.time();
    expect(Number(await redis.zscore(k.holds, '1:a')) - Number(seconds) * 1000).toBeGreaterThan(50_000);
    expect(await redis.pttl(k.holds)).toBeGreaterThan(50_000);
    await expect(
      RENEW_MANY.run(redis, [k.holds, k.fence, k.limit], [IDLE_KEY_TTL, 'permits', 1_000, '1:a']),
    ).rejects.toThrow(/BADARG kind must be .*permit, got permits/);
  });
});
