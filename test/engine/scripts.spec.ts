import { lockKeys, readWriteKeys } from '../../lib/internal';
import {
  CLAIM_ATTEMPT,
  FAIR_FORCE_UNLOCK,
  FAIR_LOCK,
  FORCE_UNLOCK,
  READ_WRITE_FORCE_UNLOCK,
  LOCK,
  WRITE_LOCK,
  PASS_WAKE,
  REDLOCK_GRANT,
  REDLOCK_RELEASE,
  RENEW_MANY,
  SIMPLE_LOCK,
  SIMPLE_UNLOCK,
  UNLOCK,
} from '../../lib/engine/scripts/catalog';
import type { HandOver } from '../../lib/engine/turns/process-turns';
import { runScriptUnchecked } from '../../lib/engine/scripts/loader';
import { connect, testPrefix } from '../support/engine';
import type Redis from 'ioredis';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import { FENCE_SEED, seedFence } from '../support/fencing';

/** Each Lua script called directly on a real Redis, with random keys. */
describe('lua scripts', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const keys = () => lockKeys(prefix, `s${++n}`);
  type Keys = ReturnType<typeof keys>;
  /** A reentrant attempt; `client` set = a caller that waits if refused (else a single attempt of client 'solo'). */
  const lock = (k: Keys, owner: string, lease = 5000, client?: string, flag: '0' | '1' | '-' = '0') =>
    LOCK.run(redis, k, {
      idleKeyTtl: IDLE_KEY_TTL,
      leaseMs: lease,
      owner,
      clientId: client ?? 'solo',
      waiting: client === undefined ? 'once' : flag,
      holdId: nextHoldId(),
    });
  let holds = 0;
  const nextHoldId = () => `hold-${++holds}`;
  /**
   * Releases one hold of `owner` (any one, under a fresh call id), or hold `holdId`. `client`: the
   * releasing process's client id (what 'keep' compares the waiting registry with).
   */
  const unlock = (k: Keys, owner: string, handOver: HandOver = 'pass', client = 'pa', holdId?: string, turnMs = 5000) =>
    UNLOCK.run(redis, k, {
      owner,
      holdId: holdId ?? nextHoldId(),
      leaseMs: 5000,
      publish: 'publish',
      message: 'm',
      handOver,
      clientId: client,
      which: holdId === undefined ? 'any' : 'one',
      turnMs,
    });

  /** Subscribes to the channels of the given waiting clients; returns who received what. */
  async function listeners(k: Keys, clients: string[]) {
    const sub = redis.duplicate();
    const heard: string[] = [];
    const messages: string[] = [];
    sub.on('message', (channel: string, message: string) => {
      heard.push(channel.slice(k.channel.length + 1));
      messages.push(message);
    });
    await sub.subscribe(...clients.map((c) => `${k.channel}:${c}`));
    const settled = () => new Promise((r) => setTimeout(r, 50));
    return {
      heard: async () => {
        await settled();
        return heard;
      },
      /** What they received, in order. */
      messages: async () => {
        await settled();
        return messages;
      },
      close: () => sub.quit(),
    };
  }

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  it('lock-5: acquires with a new token, re-enters with the same token, refuses others with the PTTL', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    expect(await lock(k, 'a')).toEqual(['granted', FENCE_SEED + 1, 0]);
    expect(await lock(k, 'a')).toEqual(['reentered', FENCE_SEED + 1]);
    expect(await redis.hget(k.lock, 'a')).toBe('2');
    const [status, pttl] = await lock(k, 'b');
    expect(status).toBe('refused');
    expect(pttl).toBeGreaterThan(4000);
    expect(await redis.exists(k.waiting)).toBe(0); // a single attempt is not registered
    await redis.del(k.lock);
    expect(await lock(k, 'b')).toEqual(['granted', FENCE_SEED + 2, 0]);
  });

  it('redlock-grant-3 / redlock-release-3: a repeat of a grant or a release changes nothing, and a late release never ends a newer grant', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    const grant = (token: string, lease = 5000) =>
      REDLOCK_GRANT.run(redis, k, { token, leaseMs: lease, idleKeyTtl: IDLE_KEY_TTL, clientId: 'c', waiting: 'once' });
    const release = (token: string) =>
      REDLOCK_RELEASE.run(redis, k, { token, publish: 'publish', message: 'm', clientId: 'c' });
    const heard: string[] = [];
    const sub = redis.duplicate();
    sub.on('message', (_channel, message: string) => heard.push(message));
    await sub.subscribe(k.channel);
    try {
      expect(await grant('t1')).toEqual(['granted', FENCE_SEED + 1]);
      // The same grant again (a client re-sending it after a reconnect): its own hold, the counter as it is.
      expect(await grant('t1', 9000)).toEqual(['granted', FENCE_SEED + 1]);
      expect(await redis.pttl(k.lock)).toBeLessThanOrEqual(5000);
      const [refused, ttl] = await grant('t2');
      expect([refused, ttl > 4000 && ttl <= 5000]).toEqual(['refused', true]);
      expect(await release('t2')).toBe('not-owner');
      expect(await release('t1')).toEqual(['released', 1]); // heard by the one subscriber
      expect(await grant('t2')).toEqual(['granted', FENCE_SEED + 2]);
      // t1's release again (sent again after an unknown outcome): t2's newer grant stays.
      expect(await release('t1')).toBe('not-owner');
      expect(await redis.get(k.lock)).toBe('t2');
      expect(await release('t2')).toEqual(['released', 1]);
      expect(await release('t2')).toBe('not-locked');
      // Not announced (message ''): released, heard by nobody.
      expect(await grant('t4')).toEqual(['granted', FENCE_SEED + 3]);
      expect(
        await REDLOCK_RELEASE.run(redis, k, { token: 't4', publish: 'publish', message: '', clientId: 'c' }),
      ).toEqual(['released', 0]);
      // Another kind holding the name: refused, and never released by a vote.
      await redis.hset(k.lock, 'owner', '1');
      expect((await grant('t3'))[0]).toBe('refused');
      expect(await release('t3')).toBe('not-owner');
      expect(await redis.type(k.lock)).toBe('hash');
      for (let i = 0; i < 50 && heard.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(heard).toEqual(['m', 'm']); // one announcement per release that ended a hold
      expect(await redis.pttl(k.fence)).toBeGreaterThan(IDLE_KEY_TTL);
    } finally {
      await sub.quit();
    }
  });

  it('redlock-grant-3 / redlock-release-3: a refused waiting vote registers its process, and a release wakes the longest-waiting one alone', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    const grant = (token: string, clientId: string, waiting: '0' | '1' | 'once') =>
      REDLOCK_GRANT.run(redis, k, { token, leaseMs: 5000, idleKeyTtl: IDLE_KEY_TTL, clientId, waiting });
    const release = (token: string, clientId: string) =>
      REDLOCK_RELEASE.run(redis, k, { token, publish: 'publish', message: 'm', clientId });
    const heard: string[] = [];
    const sub = redis.duplicate();
    sub.on('message', (channel: string) => heard.push(channel.slice(k.channel.length)));
    await sub.subscribe(k.channel, `${k.channel}:b`, `${k.channel}:c`);
    try {
      expect((await grant('a1', 'a', '0'))[0]).toBe('granted');
      expect((await grant('b1', 'b', '0'))[0]).toBe('refused');
      expect((await grant('b1', 'b', '0'))[0]).toBe('refused'); // a repeat keeps b's place
      expect((await grant('c1', 'c', '0'))[0]).toBe('refused');
      expect((await grant('d1', 'd', 'once'))[0]).toBe('refused'); // a single attempt never registers
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['b', 'c']);
      // b waited longest: it alone is told, on its own channel; another process heard it.
      expect(await release('a1', 'a')).toEqual(['released', 1]);
      // b is granted and leaves the registry; c is next.
      expect((await grant('b2', 'b', '0'))[0]).toBe('granted');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['c']);
      expect(await release('b2', 'b')).toEqual(['released', 1]); // c is told
      // c's process is granted while another of its waiters waits ('1'): it goes to the back.
      expect((await grant('c2', 'c', '1'))[0]).toBe('granted');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['c']);
      // Its own release wakes its own process: nobody else heard it.
      expect(await release('c2', 'c')).toEqual(['released', 0]);
      // A registered process nobody listens for any more is dropped; with nobody left, the unlock channel is told.
      await redis.zadd(k.waiting, 1, 'gone');
      await redis.zrem(k.waiting, 'c');
      expect((await grant('e1', 'e', 'once'))[0]).toBe('granted');
      expect(await release('e1', 'e')).toEqual(['released', 1]); // the plain channel's subscriber
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual([]);
      expect(
        await REDLOCK_GRANT.run(redis, k, {
          token: 'x',
          leaseMs: 5000,
          idleKeyTtl: IDLE_KEY_TTL,
          clientId: '',
          waiting: '0',
        }).catch((e: Error) => e.message),
      ).toMatch(/^BADARG client id is empty/);
      for (let i = 0; i < 50 && heard.length < 4; i++) await new Promise((r) => setTimeout(r, 10));
      expect(heard).toEqual([':b', ':c', ':c', '']);
    } finally {
      sub.disconnect();
    }
  });

  it("redlock-grant-3: a vote of a wait never refused ('-') leaves the waiting registry alone; refused, it registers its process", async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    const grant = (token: string, clientId: string, waiting: '0' | '-') =>
      REDLOCK_GRANT.run(redis, k, { token, leaseMs: 5000, idleKeyTtl: IDLE_KEY_TTL, clientId, waiting });
    // Process c is registered for another of its waits (refused earlier), which still waits.
    await redis.zadd(k.waiting, 1, 'c');
    expect(await grant('c1', 'c', '-')).toEqual(['granted', FENCE_SEED + 1]);
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['c']);
    // The same vote again (a client re-sending it): its own hold, nothing else changes.
    expect(await grant('c1', 'c', '-')).toEqual(['granted', FENCE_SEED + 1]);
    expect((await grant('d1', 'd', '-'))[0]).toBe('refused');
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['c', 'd']);
    // d's wait was refused: granted now ('0'), its process leaves the registry.
    await redis.del(k.lock);
    expect(await grant('d2', 'd', '0')).toEqual(['granted', FENCE_SEED + 2]);
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['c']);
  });

  it('lock-5: re-entry never shortens a longer lease', async () => {
    const k = keys();
    await lock(k, 'a', 60_000);
    await lock(k, 'a', 1_000);
    expect(await redis.pttl(k.lock)).toBeGreaterThan(50_000);
  });

  it('lock-5: a refused waiter registers its process once, in arrival order; a grant takes it out or to the back', async () => {
    const k = keys();
    await lock(k, 'holder');
    await lock(k, 'p2:x', 5000, 'p2');
    await lock(k, 'p1:x', 5000, 'p1');
    await lock(k, 'p2:y', 5000, 'p2'); // keeps p2's place
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2', 'p1']);
    expect(await redis.pttl(k.waiting)).toBeGreaterThan(50_000);
    await redis.del(k.lock);
    expect((await lock(k, 'p2:x', 5000, 'p2', '1'))[0]).toBe('granted'); // p2 still has a waiter: to the back
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p1', 'p2']);
    await redis.del(k.lock);
    expect((await lock(k, 'p1:x', 5000, 'p1', '0'))[0]).toBe('granted'); // p1's last waiter: out
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2']);
    await redis.del(k.lock);
    expect((await lock(k, 'p3:x', 5000, 'p3', '-'))[0]).toBe('granted'); // never refused, alone: the registry is not touched
    expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2']);
  });

  it('unlock-6: decrements, releases with one message to one waiting process (reserving the lock for it), and tells not-locked from not-owner', async () => {
    const k = keys();
    const sub = await listeners(k, ['p1', 'p2']);
    try {
      expect(await unlock(k, 'a')).toBe('not-locked');
      await lock(k, 'a');
      await lock(k, 'a');
      await lock(k, 'p1:x', 5000, 'p1');
      await lock(k, 'p2:x', 5000, 'p2');
      expect(await unlock(k, 'b')).toBe('not-owner');
      expect(await unlock(k, 'a')).toBe('decremented');
      expect(await sub.heard()).toEqual([]);
      // Sent together, so the 50 ms reservation is read before it can lapse on a busy machine.
      const [released, locked, reserved, reservedFor] = await Promise.all([
        unlock(k, 'a'),
        redis.exists(k.lock),
        redis.get(k.next),
        redis.pttl(k.next),
      ]);
      expect({ released, locked, reserved }).toEqual({ released: 'released', locked: 0, reserved: 'pass:p1' });
      expect(reservedFor).toBeLessThanOrEqual(50);
      expect(await sub.heard()).toEqual(['p1']); // the longest waiting process only, which keeps its place
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p1', 'p2']);
    } finally {
      await sub.close();
    }
  });

  it('unlock-6: a registered process nobody listens for is dropped and the next one woken', async () => {
    const k = keys();
    const sub = await listeners(k, ['b-alive']);
    try {
      await lock(k, 'a');
      await lock(k, 'c-dead:x', 5000, 'c-dead');
      await lock(k, 'b-alive:x', 5000, 'b-alive');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['c-dead', 'b-alive']); // arrival, not name, order
      expect(await unlock(k, 'a')).toBe('released');
      expect(await sub.heard()).toEqual(['b-alive']);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['b-alive']);
    } finally {
      await sub.close();
    }
  });

  it('simple-lock-5 / simple-unlock-4: refused waiters register; a release wakes one of them and RedLock rounds', async () => {
    const k = keys();
    const sub = await listeners(k, ['p1', 'p2']);
    const shared = redis.duplicate();
    const sharedHeard: string[] = [];
    shared.on('message', (_channel, message: string) => sharedHeard.push(message));
    await shared.subscribe(k.channel);
    const simple = (token: string, client?: string) =>
      SIMPLE_LOCK.run(
        redis,
        { ...k, released: `${k.lock}:releases` },
        {
          idleKeyTtl: IDLE_KEY_TTL,
          token,
          leaseMs: 5000,
          clientId: client ?? 'solo',
          waiting: client ? '0' : 'once',
        },
      );
    try {
      expect((await simple('t1'))[0]).toBe('granted');
      expect((await simple('t2', 'p1'))[0]).toBe('refused');
      expect((await simple('t3', 'p2'))[0]).toBe('refused');
      const release = (token: string) =>
        SIMPLE_UNLOCK.run(
          redis,
          { ...k, released: `${k.lock}:releases` },
          {
            token,
            owner: '',
            callId: '',
            publish: 'publish',
            message: 'm',
            handOver: 'pass',
            clientId: 'p0',
            turnMs: 0,
          },
        );
      expect(await release('t2')).toBe('not-owner');
      expect(await release('t1')).toBe('released');
      expect(await sub.heard()).toEqual(['p1']);
      expect(sharedHeard).toEqual(['m']);
      // p1's next attempt (each has a token of its own: t2 was released, so it is cancelled).
      expect((await simple('t2', 'p1'))[0]).toBe('refused');
      expect((await simple('t2b', 'p1'))[0]).toBe('granted');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2']);
      // 'keep' in p2's turn, p2 the only one registered: a plain release. With p1 registered too: kept.
      const keep = (token: string, client: string) =>
        SIMPLE_UNLOCK.run(
          redis,
          { ...k, released: `${k.lock}:releases` },
          {
            token,
            owner: '',
            callId: '',
            publish: 'publish',
            message: 'm',
            handOver: 'keep',
            clientId: client,
            turnMs: 500,
          },
        );
      await redis.del(k.lock);
      expect((await simple('t4'))[0]).toBe('granted');
      expect(await keep('t4', 'p2')).toBe('released');
      expect((await simple('t5'))[0]).toBe('granted');
      expect((await simple('t6', 'p1'))[0]).toBe('refused');
      expect(await keep('t5', 'p2')).toBe('kept');
      // The 'pass' release above woke p1; the kept one told p1 when p2's turn ends.
      expect(await sub.heard()).toEqual(['p1', 'p1']);
      expect((await sub.messages())[1]).toBe('after:500');
      expect(await redis.get(k.next)).toBe('turn:p2');
    } finally {
      await sub.close();
      await shared.quit();
    }
  });

  it('pass-wake-4: leaves the registry, and wakes the next process only when the lock is free', async () => {
    const k = keys();
    const sub = await listeners(k, ['p2']);
    const pass = (client: string) => PASS_WAKE.run(redis, k, { clientId: client, publish: 'publish', message: 'm' });
    try {
      await lock(k, 'a');
      await lock(k, 'p1:x', 5000, 'p1');
      await lock(k, 'p2:x', 5000, 'p2');
      expect(await pass('p1')).toBe(false); // held: nobody to wake
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2']);
      expect(await sub.heard()).toEqual([]);
      await redis.del(k.lock);
      await lock(k, 'p1:x', 5000, 'p1'); // free: granted, p1 not registered
      await redis.del(k.lock);
      expect(await pass('p1')).toBe(true);
      expect(await sub.heard()).toEqual(['p2']);
    } finally {
      await sub.close();
    }
  });

  it("unlock-6 keep: a release in the holder's turn reserves the free lock for the turn and tells the next process when it ends, once a turn", async () => {
    const k = keys();
    const sub = await listeners(k, ['p1', 'p2']);
    try {
      await lock(k, 'a');
      expect(await unlock(k, 'a', 'keep')).toBe('released'); // nobody waits: a plain release
      // 'keep' needs the releasing client's id and the turn's length, checked before any write.
      await lock(k, 'a');
      await expect(unlock(k, 'a', 'keep', '')).rejects.toThrow(/BADARG client id is empty/);
      await expect(unlock(k, 'a', 'keep', 'pa', undefined, 0)).rejects.toThrow(/BADARG turn ms/);
      expect(await redis.hgetall(k.lock)).toEqual({ a: '1' });
      await unlock(k, 'a');
      // Only the releasing process itself is registered (its own waiters): no rival, a plain release.
      await lock(k, 'a');
      await lock(k, 'p1:x', 5000, 'p1');
      expect(await unlock(k, 'a', 'keep', 'p1')).toBe('released');
      expect(await redis.exists(k.next)).toBe(0);
      await lock(k, 'a');
      await lock(k, 'p2:x', 5000, 'p2'); // and another process: now the turn is worth keeping
      expect(await unlock(k, 'a', 'keep', 'p1', undefined, 5000)).toBe('kept');
      expect(await redis.exists(k.lock)).toBe(0);
      expect(await redis.get(k.next)).toBe('turn:p1');
      expect(await redis.pttl(k.next)).toBeGreaterThan(4_000);
      // p1 is first in line itself: the next process other than p1 is told when the turn ends.
      expect(await sub.heard()).toEqual(['p2']);
      expect(await sub.messages()).toEqual(['after:5000']);
      // The holder's process takes it again: the turn's reservation stays, and a later release of the
      // turn tells nobody again.
      expect((await lock(k, 'p1:y', 5000, 'p1'))[0]).toBe('granted');
      expect(await redis.get(k.next)).toBe('turn:p1');
      expect(await unlock(k, 'p1:y', 'keep', 'p1', undefined, 4000)).toBe('kept');
      expect(await sub.heard()).toEqual(['p2']);
      expect(await redis.pttl(k.next)).toBeGreaterThan(4_000); // not moved either
      // A newcomer of another process is refused until the turn ends, and no longer.
      const [status, ttl] = await lock(k, 'p9:n', 5000, 'p9', '-');
      expect(status).toBe('refused');
      expect(ttl).toBeGreaterThan(4_000);
      expect(ttl).toBeLessThanOrEqual(5_000);
      // Nobody else waits any more: a release kept in the turn is a plain one, and ends the reservation.
      await redis.zrem(k.waiting, 'p2', 'p9');
      expect((await lock(k, 'p1:z', 5000, 'p1'))[0]).toBe('granted');
      expect(await unlock(k, 'p1:z', 'keep', 'p1')).toBe('released');
      expect(await redis.exists(k.next)).toBe(0);
      await expect(
        runScriptUnchecked(
          redis,
          'unlock-6.lua',
          [k.lock, k.channel, k.waiting, k.next, k.grants, k.fence],
          ['p9:n', 'h', 5000, 'publish', 'm', 'later', 'pa', 'one', 100],
        ),
      ).rejects.toThrow(/BADARG/);
    } finally {
      await sub.close();
    }
  });

  it('pass-wake-4: a process leaving the line while another process keeps its turn tells the next one when that turn ends', async () => {
    const k = keys();
    const sub = await listeners(k, ['p2', 'p3']);
    const pass = (client: string) => PASS_WAKE.run(redis, k, { clientId: client, publish: 'publish', message: 'm' });
    try {
      await lock(k, 'p1:a', 5000, 'p1');
      await lock(k, 'p2:x', 5000, 'p2');
      await lock(k, 'p3:x', 5000, 'p3');
      expect(await unlock(k, 'p1:a', 'keep', 'p1', undefined, 3000)).toBe('kept');
      expect(await sub.heard()).toEqual(['p2']);
      expect(await pass('p2')).toBe(false); // p2, which was told, leaves: p3 is told instead
      expect(await sub.heard()).toEqual(['p2', 'p3']);
      const [, told] = await sub.messages();
      expect(Number(told.slice('after:'.length))).toBeGreaterThan(2_000);
      expect(Number(told.slice('after:'.length))).toBeLessThanOrEqual(3_000);
      expect(await redis.get(k.next)).toBe('turn:p1'); // the turn keeps its reservation
      expect(await pass('p1')).toBe(true); // the turn's own process passes it on: p3 gets it
      expect(await redis.get(k.next)).toBe('pass:p3');
    } finally {
      await sub.close();
    }
  });

  describe('lock-5 / unlock-6: every hold has an id of its own (hold-ids.lua)', () => {
    const attempt = (k: Keys, owner: string, holdId: string, client = 'c') =>
      LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner, clientId: client, waiting: 'once', holdId });

    it('a repeated attempt (its reply lost) replies as its first run did and counts nothing; another attempt of the same owner, from any process, counts one more', async () => {
      const k = keys();
      await seedFence(redis, k.fence);
      expect(await attempt(k, 'job-8', 'b1', 'B')).toEqual(['granted', FENCE_SEED + 1, 0]);
      expect(await attempt(k, 'job-8', 'b1', 'B')).toEqual(['granted', FENCE_SEED + 1, 0]); // the repeat
      expect(await redis.hget(k.lock, 'job-8')).toBe('1');
      // Process A locks the same explicit owner: a re-entry, counted, whatever A remembers.
      expect(await attempt(k, 'job-8', 'a1', 'A')).toEqual(['reentered', FENCE_SEED + 1]);
      expect(await attempt(k, 'job-8', 'a1', 'A')).toEqual(['reentered', FENCE_SEED + 1]);
      expect(await redis.hget(k.lock, 'job-8')).toBe('2');
      // A's release (and its repeat) leaves B's hold.
      expect(await unlock(k, 'job-8', 'pass', 'A', 'a1')).toBe('decremented');
      expect(await unlock(k, 'job-8', 'pass', 'A', 'a1')).toBe('decremented');
      expect(await redis.hget(k.lock, 'job-8')).toBe('1');
      // B's release frees it; a repeat says what the first copy did and changes nothing.
      expect(await unlock(k, 'job-8', 'pass', 'B', 'b1')).toBe('released');
      expect(await attempt(k, 'job-8', 'b2', 'B')).toEqual(['granted', FENCE_SEED + 2, 0]); // B again, a new grant
      expect(await unlock(k, 'job-8', 'pass', 'B', 'b1')).toBe('released'); // an old copy: the new grant stays
      expect(await redis.hget(k.lock, 'job-8')).toBe('1');
      // A late copy of an attempt whose hold ended takes nothing.
      expect((await attempt(k, 'job-8', 'a1', 'A'))[0]).toBe('refused');
      expect(await redis.hget(k.lock, 'job-8')).toBe('1');
    });

    it('a hold whose lock ran out never counts again, even when its owner holds the lock anew', async () => {
      const k = keys();
      await seedFence(redis, k.fence);
      await attempt(k, 'o', 'old');
      await redis.del(k.lock); // its lease ran out (the record outlives it)
      expect(await attempt(k, 'o', 'new')).toEqual(['granted', FENCE_SEED + 2, 0]);
      expect((await attempt(k, 'o', 'old'))[0]).toBe('refused'); // a late copy is no repeat of a live hold
      expect(
        await CLAIM_ATTEMPT.run(redis, k, { holdId: 'old', owner: 'o', leaseMs: 5000, idleKeyTtl: 60_000 }),
      ).toEqual(['cancelled']);
      expect(await unlock(k, 'o', 'pass', 'c', 'old')).toBe('not-owner'); // nor can it release the new hold
      expect(await redis.hget(k.lock, 'o')).toBe('1');
      expect(await unlock(k, 'o', 'pass', 'c', 'new')).toBe('released');
    });

    it('a release names its hold: a hold of another owner, or an unknown id, is never touched', async () => {
      const k = keys();
      await attempt(k, 'order:1', 'o1');
      expect(await unlock(k, 'order:2', 'pass', 'c', 'o1')).toBe('not-owner');
      expect(await unlock(k, 'order:1', 'pass', 'c', 'nobody')).toBe('not-owner');
      expect(await redis.hgetall(k.lock)).toEqual({ 'order:1': '1' });
      // The unknown id is now cancelled: an attempt arriving with it later takes nothing.
      expect((await attempt(k, 'order:1', 'nobody'))[0]).toBe('refused');
      expect(await redis.hgetall(k.lock)).toEqual({ 'order:1': '1' });
    });

    it("unlock by owner ('any') ends one hold of exactly that owner under the call's id; its repeat changes nothing", async () => {
      const k = keys();
      await attempt(k, 'job:2', 'j1');
      expect(await unlock(k, 'job', 'pass', 'c', undefined)).toBe('not-owner'); // a prefix is another owner
      await attempt(k, 'job:2', 'j2');
      const byOwner = (callId: string) =>
        UNLOCK.run(redis, k, {
          owner: 'job:2',
          holdId: callId,
          leaseMs: 5000,
          publish: 'publish',
          message: 'm',
          handOver: 'pass',
          clientId: 'c',
          which: 'any',
          turnMs: 0,
        });
      expect(await byOwner('call-1')).toBe('decremented');
      expect(await byOwner('call-1')).toBe('decremented'); // re-sent after a lost reply
      expect(await redis.hget(k.lock, 'job:2')).toBe('1');
      expect(await byOwner('call-2')).toBe('released');
      expect(await byOwner('call-2')).toBe('released');
      expect(await redis.exists(k.lock)).toBe(0);
      // The holders' own releases find their holds ended by those calls: nothing more to release.
      expect(await unlock(k, 'job:2', 'pass', 'c', 'j1')).toBe('released');
      expect(await unlock(k, 'job:2', 'pass', 'c', 'j2')).toBe('released');
    });

    it('claim-attempt-3: claims an unanswered attempt that landed, else cancels it for good', async () => {
      const k = keys();
      await seedFence(redis, k.fence);
      await attempt(k, 'o', 'landed');
      expect(
        await CLAIM_ATTEMPT.run(redis, k, { holdId: 'landed', owner: 'o', leaseMs: 5000, idleKeyTtl: 60_000 }),
      ).toEqual(['granted', FENCE_SEED + 1]);
      expect(
        await CLAIM_ATTEMPT.run(redis, k, { holdId: 'late', owner: 'o', leaseMs: 5000, idleKeyTtl: 60_000 }),
      ).toEqual(['cancelled']);
      expect((await attempt(k, 'o', 'late'))[0]).toBe('refused'); // the late copy takes nothing
      expect(await redis.hget(k.lock, 'o')).toBe('1');
      await expect(
        CLAIM_ATTEMPT.run(redis, k, { holdId: '', owner: 'o', leaseMs: 5000, idleKeyTtl: 60_000 }),
      ).rejects.toThrow(/BADARG hold id/);
    });

    it("claim-attempt-3: a claim that lengthens the lease keeps the fencing counter (the holds' epoch) past it", async () => {
      const k = keys();
      // A short first lease and a 1 ms idle TTL: the counter is kept a little past 100 ms only.
      const grant = {
        leaseMs: 100,
        owner: 'o',
        clientId: 'c',
        waiting: 'once',
        holdId: 'short',
        idleKeyTtl: 1,
      } as const;
      expect((await LOCK.run(redis, k, grant))[0]).toBe('granted');
      const claim = { holdId: 'short', owner: 'o', leaseMs: 10_000, idleKeyTtl: 1 };
      expect((await CLAIM_ATTEMPT.run(redis, k, claim))[0]).toBe('granted');
      expect(await redis.pttl(k.lock)).toBeGreaterThan(9_000);
      // The counter outlives the hold it numbers: with it gone, the hold's record would read as ended.
      expect(await redis.pttl(k.fence)).toBeGreaterThanOrEqual(await redis.pttl(k.lock));
    });

    it('uncontended grants and releases keep the records a hold needs, and no more than 256 ended ones plus the live hold', async () => {
      const k = keys();
      await seedFence(redis, k.fence);
      const long = (holdId: string) =>
        LOCK.run(redis, k, {
          idleKeyTtl: IDLE_KEY_TTL,
          leaseMs: 90_000,
          owner: 'o',
          clientId: 'c',
          waiting: 'once',
          holdId,
        });
      expect(await long('u0')).toEqual(['granted', FENCE_SEED + 1, 0]);
      // The grant's record: its token and epoch, its owner; the hash outlives a lease past the minute.
      expect(await redis.hget(k.grants, 'u0')).toBe(`g${FENCE_SEED + 1}/${FENCE_SEED + 1}|o`);
      expect(await redis.pttl(k.grants)).toBeGreaterThan(80_000);
      expect(await unlock(k, 'o', 'pass', 'c', 'u0')).toBe('released');
      expect(await redis.hget(k.grants, 'u0')).toBe('r');
      expect(await redis.pttl(k.grants)).toBeLessThanOrEqual(60_000);
      for (let i = 1; i <= 300; i++) {
        expect((await attempt(k, 'o', `u${i}`))[0]).toBe('granted');
        expect(await unlock(k, 'o', 'pass', 'c', `u${i}`)).toBe('released');
      }
      expect(await redis.hlen(k.grants)).toBeLessThanOrEqual(257);
      // The newest ended records still answer their repeats.
      expect(await unlock(k, 'o', 'pass', 'c', 'u300')).toBe('released');
      expect((await attempt(k, 'o', 'u300'))[0]).toBe('refused');
      expect(await redis.exists(k.lock)).toBe(0);
    });

    it('the hold ids live as long as the lock: renewed with it, ended by a force unlock (kept a minute for repeats)', async () => {
      const k = keys();
      await attempt(k, 'o', 'r1');
      expect(await redis.pttl(k.grants)).toBeGreaterThan(4_000);
      await redis.pexpire(k.grants, 100);
      await RENEW_MANY.run(redis, [k.lock, k.grants, k.fence], [IDLE_KEY_TTL, 'held', 120_000, 'o']);
      expect(await redis.pttl(k.grants)).toBeGreaterThan(100_000);
      expect(await FORCE_UNLOCK.run(redis, k, { publish: 'publish', message: 'm', callId: 'f' })).toBe(true);
      expect(await redis.hgetall(k.grants)).toEqual({ r1: 'x' });
      expect(await redis.pttl(k.grants)).toBeLessThanOrEqual(60_000);
      expect(await unlock(k, 'o', 'pass', 'c', 'r1')).toBe('not-locked');
    });
  });

  it('lock-5 / simple-lock-5: every grant takes one fencing token, whether other processes wait or not; re-entries and refusals take none', async () => {
    const k = keys();
    await seedFence(redis, k.fence);
    const reentrant = (owner: string, clientId = 'pa', waiting: '0' | 'once' = 'once') =>
      LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner, clientId, waiting, holdId: nextHoldId() });
    expect(await reentrant('pa:1')).toEqual(['granted', FENCE_SEED + 1, 0]);
    expect((await reentrant('pb:1', 'pb', '0'))[0]).toBe('refused'); // process pb waits now
    expect(await reentrant('pa:1')).toEqual(['reentered', FENCE_SEED + 1]);
    await redis.del(k.lock);
    expect(await reentrant('pa:2')).toEqual(['granted', FENCE_SEED + 2, 1]); // pb waits: said, and still one token
    await redis.del(k.lock);
    expect(await reentrant('pb:1', 'pb', '0')).toEqual(['granted', FENCE_SEED + 3, 0]);
    await redis.del(k.lock);
    const simple = (token: string, clientId = 'pa', waiting: '0' | 'once' = 'once') =>
      SIMPLE_LOCK.run(
        redis,
        { ...k, released: `${k.lock}:releases` },
        { idleKeyTtl: IDLE_KEY_TTL, token, leaseMs: 5000, clientId, waiting },
      );
    expect(await simple('t1')).toEqual(['granted', FENCE_SEED + 4, 0]);
    expect((await simple('t2', 'pc', '0'))[0]).toBe('refused');
    await redis.del(k.lock);
    expect(await simple('t3')).toEqual(['granted', FENCE_SEED + 5, 1]);
    expect(await redis.get(k.fence)).toBe(String(FENCE_SEED + 5));
  });

  it('hand-over: the free lock waits for the process it was passed to; others are refused until it lapses', async () => {
    const k = keys();
    const sub = await listeners(k, ['p1', 'p2']);
    try {
      await lock(k, 'p0:a', 5000, 'p0');
      await lock(k, 'p1:x', 5000, 'p1');
      await lock(k, 'p2:x', 5000, 'p2');
      // Sent together: a slow machine must not let the 50 ms reservation lapse in the middle of the test.
      const [passed, reservedFor] = await Promise.all([unlock(k, 'p0:a'), redis.pttl(k.next)]); // passed to p1
      expect(passed).toBe('released');
      expect(reservedFor).toBeLessThanOrEqual(50);
      await redis.pexpire(k.next, 10_000);
      const [status, ttl] = await lock(k, 'p0:a', 5000, 'p0'); // the passer asks again at once
      expect(status).toBe('refused');
      expect(ttl).toBeGreaterThan(5_000); // refused for as long as the reservation lasts, no longer
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p1', 'p2', 'p0']); // refused: it registered
      expect((await lock(k, 'p2:x', 5000, 'p2', '0'))[0]).toBe('refused'); // nor does another waiter take it
      expect((await lock(k, 'p1:x', 5000, 'p1', '0'))[0]).toBe('granted'); // p1 does, using the reservation up
      expect(await redis.exists(k.next)).toBe(0);
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2', 'p0']);

      expect(await Promise.all([unlock(k, 'p1:x'), redis.get(k.next)])).toEqual(['released', 'pass:p2']); // passed to p2, which never comes
      await new Promise((resolve) => setTimeout(resolve, 80));
      expect((await lock(k, 'p0:a', 5000, 'p0', '0'))[0]).toBe('granted'); // the reservation lapsed by itself
    } finally {
      await sub.close();
    }
  });

  it('pass-wake-4: a process passing the lock gives up the hand-over reserved for it', async () => {
    const k = keys();
    const sub = await listeners(k, ['p1', 'p2']);
    const pass = (client: string) => PASS_WAKE.run(redis, k, { clientId: client, publish: 'publish', message: 'm' });
    try {
      await lock(k, 'a');
      await lock(k, 'p1:x', 5000, 'p1');
      await lock(k, 'p2:x', 5000, 'p2');
      expect(await Promise.all([unlock(k, 'a'), redis.pexpire(k.next, 10_000)])).toEqual(['released', 1]); // see above
      expect(await redis.get(k.next)).toBe('pass:p1');
      expect(await pass('p2')).toBe(false); // reserved for p1: p2 leaves, nothing else changes
      expect(await redis.get(k.next)).toBe('pass:p1');
      await lock(k, 'p2:x', 5000, 'p2');
      expect(await Promise.all([pass('p1'), redis.get(k.next)])).toEqual([true, 'pass:p2']); // p1 no longer wants it: it goes to p2
      expect(await sub.heard()).toEqual(['p1', 'p2']);
    } finally {
      await sub.close();
    }
  });

  it('renew-many-n: extends only for the owner', async () => {
    const k = keys();
    await lock(k, 'a', 1000);
    expect(await RENEW_MANY.run(redis, [k.lock, k.fence], [IDLE_KEY_TTL, 'hash', 30_000, 'b'])).toEqual([0]);
    expect(await redis.pttl(k.lock)).toBeLessThanOrEqual(1000);
    expect(await RENEW_MANY.run(redis, [k.lock, k.fence], [IDLE_KEY_TTL, 'hash', 30_000, 'a'])).toEqual([1]);
    expect(await redis.pttl(k.lock)).toBeGreaterThan(20_000);
  });

  it('force-unlock-6: deletes whoever holds it and wakes a waiting process', async () => {
    const k = keys();
    const sub = await listeners(k, ['p1']);
    try {
      await lock(k, 'a');
      await lock(k, 'p1:x', 5000, 'p1');
      const force = (callId: string) => FORCE_UNLOCK.run(redis, k, { publish: 'publish', message: 'f', callId });
      expect(await force('f1')).toBe(true);
      expect(await force('f2')).toBe(false);
      expect(await sub.heard()).toEqual(['p1']);
    } finally {
      await sub.close();
    }
  });

  describe('a force unlock sent again after its reply was lost (its first run landed)', () => {
    const rwWrite = (owner: string) =>
      WRITE_LOCK.run(redis, readWriteKeys(prefix, 'force-rw'), {
        idleKeyTtl: IDLE_KEY_TTL,
        leaseMs: 5000,
        owner,
        intentMs: 0,
        holdId: nextHoldId(),
        waitId: 'w',
      });
    const kinds: [
      kind: string,
      take: (owner: string) => Promise<unknown>,
      force: (callId: string) => Promise<boolean>,
      holder: () => Promise<unknown>,
    ][] = [];
    const k = keys();
    kinds.push([
      'force-unlock-6',
      (owner) => lock(k, owner),
      (callId) => FORCE_UNLOCK.run(redis, k, { publish: 'publish', message: 'f', callId }),
      () => redis.hgetall(k.lock),
    ]);
    const fair = keys();
    kinds.push([
      'fair-force-unlock-8',
      (owner) =>
        FAIR_LOCK.run(redis, fair, {
          idleKeyTtl: IDLE_KEY_TTL,
          leaseMs: 5000,
          owner,
          staleWaiterTimeout: 5000,
          acceptanceLease: 1000,
          publish: 'publish',
          holdId: `h-${owner}`,
          waiterId: `c:${owner}`,
          mode: 'once',
        }),
      (callId) =>
        FAIR_FORCE_UNLOCK.run(redis, fair, {
          idleKeyTtl: IDLE_KEY_TTL,
          acceptanceLease: 1000,
          publish: 'publish',
          callId,
        }),
      // The owners' holds; a field starting with NUL is the fair lock's record of the wait it was granted to.
      async () => Object.fromEntries(Object.entries(await redis.hgetall(fair.lock)).filter(([f]) => f[0] !== '\0')),
    ]);
    const rw = readWriteKeys(prefix, 'force-rw');
    kinds.push([
      'rw-force-unlock-8',
      rwWrite,
      (callId) => READ_WRITE_FORCE_UNLOCK.run(redis, rw, { side: 'write', publish: 'publish', callId }),
      () => redis.hgetall(rw.write),
    ]);

    it.each(kinds)(
      '%s: the repeat leaves the lock someone took in between, and replies as the first run did',
      async (_kind, take, force, holder) => {
        await take('first');
        expect(await force('call-1')).toBe(true);
        await take('second'); // the unlock woke a waiter, which took the lock before the repeat came
        expect(await force('call-1')).toBe(true); // the same reply
        expect(await holder()).toEqual({ second: '1' }); // and its hold is still there
        expect(await force('call-2')).toBe(true); // another call is another force
        expect(await holder()).toEqual({});
        expect(await force('call-3')).toBe(false);
        expect(await force('call-3')).toBe(false);
      },
    );
  });

  describe('an attempt sent again after its reply was lost (its first run landed)', () => {
    it('fair-lock-6 is told by its hold id: counts one hold and says what its first run said; a hold of the same owner it knew nothing of is a re-entry, counted', async () => {
      const fair = lockKeys(prefix, 'fair-repeat');
      const attempt = (holdId: string, waiterId = `c:w-${holdId}`) =>
        FAIR_LOCK.run(redis, fair, {
          idleKeyTtl: IDLE_KEY_TTL,
          owner: 'c:1',
          leaseMs: 5000,
          staleWaiterTimeout: 5000,
          acceptanceLease: 1000,
          publish: 'publish',
          holdId,
          waiterId, // each call's own: a copy sent again carries the same
          mode: 'once',
        });
      const count = () => redis.hget(fair.lock, 'c:1');
      const first = await attempt('h1');
      expect(first[0]).toBe('granted');
      expect(await attempt('h1')).toEqual(first); // the repeat
      expect(await count()).toBe('1');
      // The same reply for a hold whose lease is nearly over (its caller lost track of it) renews the lease.
      await redis.pexpire(fair.lock, 100);
      await attempt('h1');
      expect(await redis.pttl(fair.lock)).toBeGreaterThan(4_000);
      // Another call of the same owner (another process's, knowing nothing of the first): counted.
      const reentry = await attempt('h2');
      expect(reentry).toEqual(['reentered', first[1]]);
      expect(await attempt('h2')).toEqual(reentry);
      expect(await count()).toBe('2');
      // An attempt cancelled before it landed (claim-attempt-3) takes nothing when its copy comes.
      expect(
        await CLAIM_ATTEMPT.run(redis, fair, { holdId: 'h3', owner: 'c:1', leaseMs: 5000, idleKeyTtl: 60_000 }),
      ).toEqual(['cancelled']);
      expect((await attempt('h3'))[0]).toBe('refused');
      expect(await count()).toBe('2');
      await expect(attempt('')).rejects.toThrow(/BADARG hold id/);
      expect(await count()).toBe('2');
    });

    it('simple-lock-5 with the same token is granted again, takes no new fencing token, and holds one lock', async () => {
      const s = keys();
      await seedFence(redis, s.fence);
      const attempt = () =>
        SIMPLE_LOCK.run(
          redis,
          { ...s, released: `${s.lock}:releases` },
          {
            idleKeyTtl: IDLE_KEY_TTL,
            token: 'c:1:t',
            leaseMs: 5000,
            clientId: 'c',
            waiting: '0',
          },
        );
      expect(await attempt()).toEqual(['granted', FENCE_SEED + 1, 0]);
      expect(await attempt()).toEqual(['granted', FENCE_SEED + 1, 0]);
      expect(await redis.get(s.lock)).toBe('c:1:t');
      expect(await redis.get(s.fence)).toBe(String(FENCE_SEED + 1));
      // Another token is still refused.
      const other = await SIMPLE_LOCK.run(
        redis,
        { ...s, released: `${s.lock}:releases` },
        {
          idleKeyTtl: IDLE_KEY_TTL,
          token: 'c:2:t',
          leaseMs: 5000,
          clientId: 'c',
          waiting: 'once',
        },
      );
      expect(other[0]).toBe('refused');
    });
  });
});
