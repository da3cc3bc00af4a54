import type Redis from 'ioredis';
import {
  RENEW_MANY,
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_RELEASE,
  SEMAPHORE_SET_PERMITS,
  SEMAPHORE_STATE,
} from '../../lib/engine/scripts/catalog';
import { permitKeys } from '../../lib/engine/kinds/permit-keys';
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
  const ACCEPTANCE = 1_000;
  /** `client` set: a caller that waits if refused (else a single attempt of client 'solo'). */
  const acquire = (
    k: Keys,
    member: string,
    permits: number,
    lease = 5_000,
    limit = 3,
    client?: string,
    mode: 'wait' | 'queued' = 'wait',
    stale = 5_000,
  ) =>
    SEMAPHORE_ACQUIRE.run(redis, k, {
      idleKeyTtl: IDLE_KEY_TTL,
      member,
      permits,
      leaseMs: lease,
      configuredLimit: limit,
      publish: 'publish',
      clientId: client ?? 'solo',
      mode: client === undefined ? 'once' : mode,
      acceptanceLease: ACCEPTANCE,
      staleWaiterTimeout: stale,
    });
  const release = (k: Keys, member: string, limit = 3, memoryMs = 5_000, leavingClient = '') =>
    SEMAPHORE_RELEASE.run(redis, k, {
      member,
      configuredLimit: limit,
      publish: 'publish',
      memoryMs,
      acceptanceLease: ACCEPTANCE,
      idleKeyTtl: IDLE_KEY_TTL,
      leavingClient,
    });
  const state = (k: Keys, limit = 3) => SEMAPHORE_STATE.run(redis, k, { configuredLimit: limit });
  const setPermits = (k: Keys, permits: number) =>
    SEMAPHORE_SET_PERMITS.run(redis, k, {
      idleKeyTtl: IDLE_KEY_TTL,
      permits,
      publish: 'publish',
      acceptanceLease: ACCEPTANCE,
    });
  const serverMs = async () => {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };

  /** Listens on client `client`'s channel; `heard()` is what arrived so far. */
  async function listen(k: Keys, client: string) {
    const sub = redis.duplicate();
    const got: string[] = [];
    sub.on('message', (_channel: string, message: string) => got.push(message));
    await sub.subscribe(`${k.channel}:${client}`);
    return {
      heard: async () => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return [...got];
      },
      close: () => sub.quit(),
    };
  }

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  it('semaphore-acquire-7: grants whole acquisitions up to the limit, refuses with the time to the earliest lease end and the server time', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    expect(await acquire(k, '2:a', 2, 60_000)).toEqual(['granted', FENCE_SEED + 1, 1]);
    const before = await serverMs();
    const [status, ms, available, now] = await acquire(k, '2:b', 2, 5_000);
    expect([status, available]).toEqual(['refused', 1]);
    expect(ms).toBeGreaterThan(50_000);
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(await serverMs());
    expect(await redis.zcard(k.holds)).toBe(1); // refused: nothing taken
    expect(await redis.exists(k.waiting)).toBe(0); // a single attempt never queues
    expect(await acquire(k, '1:c', 1)).toEqual(['granted', FENCE_SEED + 2, 0]);
    expect(await state(k)).toEqual([3, 3]);
    // A permits count that disagrees with the member is refused before any write.
    await expect(acquire(k, '2:d', 1)).rejects.toThrow(/BADARG/);
    await expect(acquire(k, '1:e', 1, 0)).rejects.toThrow(/BADARG/);
  });

  it('semaphore-release-7: hands the freed permits to the longest-waiting acquisition that fits, recording its hold with the acceptance lease', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    await acquire(k, '3:a', 3, 60_000);
    const [p1, p2] = [await listen(k, 'p1'), await listen(k, 'p2')];
    try {
      const [, , , refusedAt] = await acquire(k, '1:x', 1, 60_000, 3, 'p1');
      await acquire(k, '1:y', 1, 60_000, 3, 'p2');
      await acquire(k, '2:z', 2, 60_000, 3, 'p1');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['2:p11:x', '2:p21:y', '2:p12:z']);
      expect(await release(k, '3:a')).toBe('released');
      // 3 free: 1:x, then 1:y, and 2:z does not fit in the one left; each told on its client's channel.
      const [heard1, heard2] = [await p1.heard(), await p2.heard()];
      expect(heard1).toHaveLength(1);
      const [member, payload] = heard1[0].split('|');
      const [grantedAt, token] = payload.split(':').map(Number);
      expect(member).toBe('1:x');
      expect(grantedAt).toBeGreaterThanOrEqual(refusedAt!);
      expect(token).toBe(FENCE_SEED + 2);
      expect(heard2).toEqual([`1:y|${grantedAt}:${FENCE_SEED + 3}`]);
      expect(Number(await redis.zscore(k.holds, '1:x'))).toBe(grantedAt + ACCEPTANCE);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['2:p12:z']);
      expect(await state(k)).toEqual([3, 2]);
      // The same release sent again (a lost reply): it hands nothing over twice.
      expect(await release(k, '3:a')).toBe('released');
      expect([(await p1.heard()).length, (await p2.heard()).length]).toEqual([1, 1]);
      // The waiter's own attempt finds its member held: granted, with its own lease from now.
      const [status] = await acquire(k, '1:x', 1, 60_000, 3, 'p1', 'queued');
      expect(status).toBe('granted');
      expect(Number(await redis.zscore(k.holds, '1:x'))).toBeGreaterThan((await serverMs()) + 50_000);
      // Released: the 2 free go to 2:z.
      expect(await release(k, '1:x')).toBe('released');
      expect((await p1.heard())[1]).toMatch(/^2:z\|\d+:\d+$/);
      expect(await redis.zcard(k.waiting)).toBe(0);
      expect(await redis.zcard(k.deadlines)).toBe(0);
    } finally {
      await p1.close();
      await p2.close();
    }
  });

  it('semaphore-release-7: passes by a waiter nobody listens for, keeping its place, and drops one whose deadline passed, handing to the next', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 60_000, 1);
    const live = await listen(k, 'live');
    try {
      await acquire(k, '1:unheard', 1, 60_000, 1, 'away'); // its client does not listen now
      await acquire(k, '1:stale', 1, 60_000, 1, 'live', 'wait', 50); // stops refreshing
      await acquire(k, '1:next', 1, 60_000, 1, 'live');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await release(k, '1:a', 1)).toBe('released');
      expect(await live.heard()).toEqual([expect.stringMatching(/^1:next\|/)]);
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:next']);
      // Kept, for one acceptance lease (its 60 s deadline cut short): a reconnecting subscriber's waiter
      // refreshes it by then; a dead process's is not told at every hand-over until its deadline.
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['4:away1:unheard']);
      const deadline = Number(await redis.zscore(k.deadlines, '4:away1:unheard'));
      expect(deadline - (await serverMs())).toBeLessThanOrEqual(ACCEPTANCE);
      // Then gone: the hand-over to the next ran out too, and an attempt takes the permit itself.
      await new Promise((resolve) => setTimeout(resolve, ACCEPTANCE + 100));
      expect((await acquire(k, '1:later', 1, 60_000, 1, 'live'))[0]).toBe('granted');
      expect(await redis.zcard(k.waiting)).toBe(0);
    } finally {
      await live.close();
    }
  });

  it('semaphore-release-7: a waiter that was passed by while nobody listened is next once its client listens again', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 60_000, 1);
    const other = await listen(k, 'other');
    try {
      await acquire(k, '1:first', 1, 60_000, 1, 'back'); // queued first; its subscriber is away
      await acquire(k, '1:second', 1, 60_000, 1, 'other');
      await acquire(k, '1:third', 1, 60_000, 1, 'other');
      expect(await release(k, '1:a', 1)).toBe('released'); // to the second: nobody hears the first
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:second']);
      const back = await listen(k, 'back'); // its subscriber is back
      try {
        expect(await release(k, '1:second', 1)).toBe('released');
        expect(await back.heard()).toEqual([expect.stringMatching(/^1:first\|/)]);
        expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:first']);
        expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['5:other1:third']);
      } finally {
        await back.close();
      }
    } finally {
      await other.close();
    }
  });

  it('semaphore-acquire-7: a hand-over not taken up runs out with its acceptance lease, and the next acquisition reclaims it for the queue first', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 60_000, 1);
    const [frozen, next] = [await listen(k, 'frozen'), await listen(k, 'next')];
    try {
      await acquire(k, '1:f', 1, 60_000, 1, 'frozen');
      await acquire(k, '1:n', 1, 60_000, 1, 'next');
      await release(k, '1:a', 1);
      expect(await frozen.heard()).toHaveLength(1);
      // The frozen waiter never renews: a newcomer is refused until the acceptance lease ends ...
      expect((await acquire(k, '1:new', 1, 60_000, 1))[0]).toBe('refused');
      await new Promise((resolve) => setTimeout(resolve, ACCEPTANCE + 50));
      // ... and then the permit goes to the queue's next waiter, not to the newcomer.
      expect((await acquire(k, '1:new', 1, 60_000, 1))[0]).toBe('refused');
      expect(await next.heard()).toEqual([expect.stringMatching(/^1:n\|/)]);
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:n']);
      // The frozen waiter, thawed, asks: its member is not held any more, so it is refused and queues again.
      const [status] = await acquire(k, '1:f', 1, 60_000, 1, 'frozen', 'queued');
      expect(status).toBe('refused');
    } finally {
      await frozen.close();
      await next.close();
    }
  });

  it('semaphore-release-7 leaving: an ended wait leaves the queue and gives back permits handed to it; a late copy of its attempt takes nothing', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 60_000, 1);
    const [p1, p2] = [await listen(k, 'p1'), await listen(k, 'p2')];
    try {
      await acquire(k, '1:w', 1, 60_000, 1, 'p1');
      await acquire(k, '1:v', 1, 60_000, 1, 'p2');
      await release(k, '1:a', 1); // handed to 1:w, whose wait ended meanwhile
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:w']);
      await release(k, '1:w', 1, 5_000, 'p1');
      expect(await p2.heard()).toEqual([expect.stringMatching(/^1:v\|/)]);
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:v']);
      // A late copy of 1:w's attempt (its reply never came) takes nothing and queues nothing.
      await release(k, '1:v', 1);
      expect((await acquire(k, '1:w', 1, 60_000, 1, 'p1', 'queued'))[0]).toBe('refused');
      expect(await redis.zcard(k.holds)).toBe(0);
      expect(await redis.zcard(k.waiting)).toBe(0);
      // A wait that ended before anything was handed to it just leaves.
      await acquire(k, '1:b', 1, 60_000, 1);
      await acquire(k, '1:u', 1, 60_000, 1, 'p1');
      await release(k, '1:u', 1, 5_000, 'p1');
      expect(await redis.zcard(k.waiting)).toBe(0);
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:b']);
    } finally {
      await p1.close();
      await p2.close();
    }
  });

  it('semaphore-release-7 leaving: a wait that ended before anything was handed to it is remembered, so a late copy of its attempt takes nothing', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 60_000, 1);
    const p1 = await listen(k, 'p1');
    try {
      // The wait's attempt queued it; then the wait ends (a copy of that attempt, re-sent after a lost
      // reply, may still come).
      await acquire(k, '1:w', 1, 60_000, 1, 'p1');
      await release(k, '1:w', 1, 5_000, 'p1');
      expect(await redis.zcard(k.waiting)).toBe(0);
      await release(k, '1:a', 1);
      expect(await redis.zcard(k.holds)).toBe(0);
      // A copy of the ended wait's attempt comes now, the permit free: it must take nothing (nobody
      // would ever renew or release that hold, and it would keep the permit for its whole lease).
      expect((await acquire(k, '1:w', 1, 60_000, 1, 'p1', 'queued'))[0]).toBe('refused');
      expect((await acquire(k, '1:w', 1, 60_000, 1, 'p1', 'wait'))[0]).toBe('refused');
      expect(await redis.zcard(k.holds)).toBe(0);
      expect(await redis.zcard(k.waiting)).toBe(0);
      expect((await acquire(k, '1:b', 1, 60_000, 1))[0]).toBe('granted');
    } finally {
      await p1.close();
    }
  });

  it('semaphore-acquire-7 run twice: a waiting attempt sent again (its reply lost) when permits came free takes them itself, and stays out of the queue', async () => {
    const k = keys();
    await acquire(k, '1:a', 1, 300, 1); // runs out on its own: freed without a release
    const p1 = await listen(k, 'p1');
    try {
      expect((await acquire(k, '1:w', 1, 60_000, 1, 'p1'))[0]).toBe('refused');
      await new Promise((resolve) => setTimeout(resolve, 400));
      // The same attempt again (a copy, or the next attempt after a lost reply, still in 'wait' mode).
      const [status] = await acquire(k, '1:w', 1, 60_000, 1, 'p1');
      expect(status).toBe('granted');
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:w']);
      expect(await redis.zcard(k.waiting)).toBe(0);
      expect(await redis.zcard(k.deadlines)).toBe(0);
      // Its release then hands nothing to the acquisition that just ended.
      expect(await release(k, '1:w', 1)).toBe('released');
      expect(await redis.zcard(k.holds)).toBe(0);
    } finally {
      await p1.close();
    }
  });

  it('semaphore-release-7: releases once; a repeat replies as the first run while remembered', async () => {
    const k = keys();
    await Promise.all(['1:a', '1:b', '1:x'].map((member) => acquire(k, member, 1)));
    expect(await release(k, '1:x', 3, 5_000)).toBe('released');
    expect(await release(k, '1:a', 3, 200)).toBe('released');
    expect(await release(k, '1:a', 3, 200)).toBe('released');
    expect(await state(k)).toEqual([3, 1]);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await release(k, '1:a')).toBe('not-locked'); // no longer remembered
    await acquire(k, '1:c', 1, 50);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await release(k, '1:c')).toBe('not-locked');
    expect(await release(k, '1:b', 3, 5_000)).toBe('released');
    expect(await redis.zrange(k.released, 0, -1)).toEqual(['1:x', '1:b']);
    expect(await redis.pttl(k.released)).toBeGreaterThan(4_000);
    await expect(release(k, '1:b', 3, 0)).rejects.toThrow(/BADARG memory/);
    await expect(release(k, '1:b', 0)).rejects.toThrow(/BADARG limit/);
  });

  it('semaphore-set-permits-6: the stored limit wins over the configured one; growing hands permits to the queue', async () => {
    const k = keys();
    await acquire(k, '3:a', 3);
    const p1 = await listen(k, 'p1');
    try {
      expect(await setPermits(k, 2)).toBe(-1);
      const limitTtl = await redis.pttl(k.limit);
      expect(limitTtl).toBeGreaterThan(IDLE_KEY_TTL);
      expect(limitTtl).toBeLessThanOrEqual(IDLE_KEY_TTL + 5_000);
      expect((await acquire(k, '1:b', 1, 5_000, 10, 'p1'))[0]).toBe('refused'); // the configured 10 does not apply
      expect((await acquire(k, '3:c', 3, 5_000, 10, 'p1'))[1]).toBe(-2); // above the limit: never grantable
      expect(await setPermits(k, 5)).toBe(1);
      expect(await p1.heard()).toEqual([expect.stringMatching(/^1:b\|/)]);
      await expect(setPermits(k, 0)).rejects.toThrow(/BADARG/);
    } finally {
      await p1.close();
    }
  });

  it('semaphore-acquire-7 and -release-7: a grant and a hand-over keep a stored limit alive past their lease; with none stored, none is made', async () => {
    const stored = keys();
    expect(await setPermits(stored, 1)).toBe(1);
    expect((await acquire(stored, '1:a', 1, 60_000))[0]).toBe('granted');
    expect(await redis.pttl(stored.limit)).toBeGreaterThan(60_000 + IDLE_KEY_TTL - 5_000);
    const p1 = await listen(stored, 'p1');
    try {
      expect((await acquire(stored, '1:b', 1, 60_000, 3, 'p1'))[0]).toBe('refused');
      await redis.pexpire(stored.limit, 2_000); // shorter than the hand-over's lease and idle TTL
      expect(await release(stored, '1:a')).toBe('released');
      expect(await p1.heard()).toEqual([expect.stringMatching(/^1:b\|/)]);
      expect(await redis.pttl(stored.limit)).toBeGreaterThan(ACCEPTANCE + IDLE_KEY_TTL - 1_000);
      expect(await redis.get(stored.limit)).toBe('1');
    } finally {
      await p1.close();
    }
    const none = keys();
    expect((await acquire(none, '1:a', 1, 60_000, 1))[0]).toBe('granted');
    const p2 = await listen(none, 'p2');
    try {
      expect((await acquire(none, '1:b', 1, 60_000, 1, 'p2'))[0]).toBe('refused');
      expect(await release(none, '1:a', 1)).toBe('released');
      expect(await p2.heard()).toEqual([expect.stringMatching(/^1:b\|/)]);
      expect(await redis.exists(none.limit)).toBe(0);
    } finally {
      await p2.close();
    }
  });

  it('semaphore-set-permits-6 shrinking while waiters queue and a hand-over is unaccepted: releases hand over only below the new limit', async () => {
    const k = keys();
    await Promise.all(['1:a', '1:b', '1:c'].map((member) => acquire(k, member, 1, 60_000, 3)));
    const p1 = await listen(k, 'p1');
    try {
      await acquire(k, '1:x', 1, 60_000, 3, 'p1');
      await acquire(k, '1:y', 1, 60_000, 3, 'p1');
      await acquire(k, '1:z', 1, 60_000, 3, 'p1');
      expect(await release(k, '1:a', 3)).toBe('released'); // handed to 1:x, not accepted yet
      expect(await p1.heard()).toEqual([expect.stringMatching(/^1:x\|/)]);
      expect(await setPermits(k, 1)).toBe(-2); // b, c and the hand-over to x count: nobody loses a permit
      expect(await release(k, '1:b', 3)).toBe('released');
      expect(await release(k, '1:c', 3)).toBe('released');
      expect(await p1.heard()).toHaveLength(1); // still at the limit (x): nothing more handed over
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:x']);
      expect(await release(k, '1:x', 3)).toBe('released');
      expect(await p1.heard()).toEqual([expect.stringMatching(/^1:x\|/), expect.stringMatching(/^1:y\|/)]);
      expect(await redis.zrange(k.holds, 0, -1)).toEqual(['1:y']);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['2:p11:z']);
    } finally {
      await p1.close();
    }
  });

  it('semaphore-acquire-7: a single attempt of a wait that is still queued leaves the queue when granted, so its release does not hand its permits back to it', async () => {
    const k = keys();
    expect((await acquire(k, '1:holder', 1, 5_000, 1))[0]).toBe('granted');
    // The wait's first attempt: refused and queued under client c1.
    expect((await acquire(k, '1:waiter', 1, 5_000, 1, 'c1'))[0]).toBe('refused');
    // Released while nobody listens on c1's channel: the entry keeps its place, nothing is handed to it.
    expect(await release(k, '1:holder', 1)).toBe('released');
    // A later attempt of that wait made as a single one (its client resubscribing) is granted.
    const once = { idleKeyTtl: IDLE_KEY_TTL, member: '1:waiter', permits: 1, leaseMs: 5_000, configuredLimit: 1 };
    const modes = { publish: 'publish', clientId: 'c1', mode: 'once', acceptanceLease: ACCEPTANCE } as const;
    expect((await SEMAPHORE_ACQUIRE.run(redis, k, { ...once, ...modes, staleWaiterTimeout: 5_000 }))[0]).toBe(
      'granted',
    );
    expect(await redis.zcard(k.waiting)).toBe(0);
    const heard = await listen(k, 'c1');
    expect(await release(k, '1:waiter', 1)).toBe('released');
    // Nothing of it is held again, and the permit is free for anyone.
    expect(await redis.zscore(k.holds, '1:waiter')).toBeNull();
    expect((await acquire(k, '1:other', 1, 5_000, 1))[0]).toBe('granted');
    expect(await heard.heard()).toEqual([]);
    await heard.close();
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
