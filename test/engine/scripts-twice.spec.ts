import { lockKeys, readWriteKeys } from '../../lib/internal';
import {
  LOCK,
  PASS_WAKE,
  READ_CLAIM_ATTEMPT,
  READ_LOCK,
  READ_WRITE_FORCE_UNLOCK,
  SIMPLE_CLAIM,
  SIMPLE_LOCK,
  SIMPLE_UNLOCK,
  UNLOCK,
  WRITE_ABANDON,
  WRITE_LOCK,
} from '../../lib/engine/scripts/catalog';
import { connect, testPrefix } from '../support/engine';
import type Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import { FENCE_SEED, seedFence } from '../support/fencing';

/**
 * Every script run twice with the same KEYS and ARGV, as an application's ioredis client does when it
 * re-sends a command on its new connection: the second run changes nothing it should not, and replies
 * what the script's header promises. Complements the repeats already checked in scripts.spec.ts,
 * rw-scripts.spec.ts and simple-lock-owners.spec.ts (the attempts and releases of a live hold, the
 * force unlocks of the reentrant lock and of the write side).
 */
describe('lua scripts run twice with the same arguments', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const simpleKeys = () => {
    const k = lockKeys(prefix, `t${++n}`);
    return { ...k, released: `${k.lock}:releases` };
  };
  const rwKeys = () => readWriteKeys(prefix, `trw${++n}`);
  type SimpleKeys = ReturnType<typeof simpleKeys>;
  type RwKeys = ReturnType<typeof rwKeys>;

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  /** Runs `script` twice; returns both replies. */
  const twice = async <T>(script: () => Promise<T>): Promise<[T, T]> => [await script(), await script()];

  describe('simple lock', () => {
    const take = (k: SimpleKeys, token: string, client = 'c', waiting: '0' | 'once' = 'once') =>
      SIMPLE_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, token, leaseMs: 5000, clientId: client, waiting });
    const release = (k: SimpleKeys, token: string) =>
      SIMPLE_UNLOCK.run(redis, k, {
        token,
        owner: '',
        callId: '',
        publish: 'publish',
        message: 'm',
        handOver: 'pass',
        clientId: 'c',
        turnMs: 0,
      });

    it('simple-lock-5: a copy of a granted attempt arriving after its hold was released takes no second hold', async () => {
      const k = simpleKeys();
      await seedFence(redis, k.fence);
      expect(await take(k, 't1')).toEqual(['granted', FENCE_SEED + 1, 0]);
      expect(await release(k, 't1')).toBe('released');
      // The first copy's reply was lost, the hold was released (claimed, used, released): the copy
      // re-sent on the new connection must not take the lock again under a token nobody will release.
      expect((await take(k, 't1'))[0]).toBe('refused');
      expect(await redis.exists(k.lock)).toBe(0);
      expect(await redis.get(k.fence)).toBe(String(FENCE_SEED + 1));
    });

    it('simple-lock-5: a copy arriving after another took the lock leaves that hold and its fencing token', async () => {
      const k = simpleKeys();
      await seedFence(redis, k.fence);
      await take(k, 't1');
      await release(k, 't1');
      expect(await take(k, 't2')).toEqual(['granted', FENCE_SEED + 2, 0]);
      expect((await take(k, 't1'))[0]).toBe('refused');
      expect(await redis.get(k.lock)).toBe('t2');
      expect(await redis.get(k.fence)).toBe(String(FENCE_SEED + 2));
    });

    it('simple-lock-5: a refused waiting attempt run twice registers its process once and takes nothing', async () => {
      const k = simpleKeys();
      await take(k, 'held');
      const [a, b] = await twice(() => take(k, 'w1', 'pw', '0'));
      expect(a[0]).toBe('refused');
      expect(b[0]).toBe('refused');
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['pw']);
      expect(await redis.get(k.lock)).toBe('held');
    });
    const releaseByOwner = (k: SimpleKeys, owner: string, callId: string) =>
      SIMPLE_UNLOCK.run(redis, k, {
        token: '',
        owner,
        callId,
        publish: 'publish',
        message: 'm',
        handOver: 'pass',
        clientId: 'c',
        turnMs: 0,
      });
    const claim = (k: SimpleKeys, token: string) => SIMPLE_CLAIM.run(redis, k, { token });
    const token = (owner: string) => `${randomUUID()}:${owner}`;

    it('simple-lock-5: a copy of a granted attempt arriving after a release by owner takes nothing', async () => {
      const k = simpleKeys();
      const t1 = token('job');
      expect((await take(k, t1))[0]).toBe('granted');
      expect(await releaseByOwner(k, 'job', randomUUID())).toBe('released');
      expect((await take(k, t1))[0]).toBe('refused');
      expect(await redis.exists(k.lock)).toBe(0);
    });

    it('simple-claim-3: an attempt that never landed is cancelled, run twice; its copy arriving after takes nothing', async () => {
      const k = simpleKeys();
      const lost = token('job');
      expect(await twice(() => claim(k, lost))).toEqual([['cancelled'], ['cancelled']]);
      expect((await take(k, lost))[0]).toBe('refused');
      expect(await redis.exists(k.lock)).toBe(0);
      // Another attempt is granted as usual.
      expect((await take(k, token('job')))[0]).toBe('granted');
    });

    it('simple-claim-3: an attempt that landed is claimed with the fencing counter, run twice; nothing changes', async () => {
      const k = simpleKeys();
      await seedFence(redis, k.fence);
      const landed = token('job');
      await take(k, landed);
      const ttl = await redis.pttl(k.lock);
      expect(await twice(() => claim(k, landed))).toEqual([
        ['granted', FENCE_SEED + 1],
        ['granted', FENCE_SEED + 1],
      ]);
      expect(await redis.get(k.lock)).toBe(landed);
      expect(await redis.pttl(k.lock)).toBeLessThanOrEqual(ttl);
      expect(await redis.exists(k.released)).toBe(0);
    });

    it('simple-unlock-5: a release of a token the lock does not hold cancels it (said again, the same reply); its attempt then takes nothing', async () => {
      const k = simpleKeys();
      const never = token('job');
      expect(await twice(() => release(k, never))).toEqual(['not-locked', 'not-locked']);
      expect((await take(k, never))[0]).toBe('refused');
      const other = token('other');
      await take(k, other);
      const late = token('job');
      expect(await twice(() => release(k, late))).toEqual(['not-owner', 'not-owner']);
      expect(await release(k, other)).toBe('released');
      expect((await take(k, late))[0]).toBe('refused');
      expect(await redis.exists(k.lock)).toBe(0);
    });
  });

  describe('reentrant lock', () => {
    it('lock-5: a refused waiting attempt run twice registers its process once and counts nothing', async () => {
      const k = lockKeys(prefix, `t${++n}`);
      const attempt = (owner: string, holdId: string, client: string) =>
        LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner, clientId: client, waiting: '0', holdId });
      await attempt('a', 'h-a', 'pa');
      const [x, y] = await twice(() => attempt('b', 'h-b', 'pb'));
      expect(x[0]).toBe('refused');
      expect(y[0]).toBe('refused');
      expect(await redis.hgetall(k.lock)).toEqual({ a: '1' });
      expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['pb']);
    });

    it('lock-5: a repeat of a granted attempt never shortens the lease', async () => {
      const k = lockKeys(prefix, `t${++n}`);
      const attempt = (leaseMs: number) =>
        LOCK.run(redis, k, {
          idleKeyTtl: IDLE_KEY_TTL,
          leaseMs,
          owner: 'o',
          clientId: 'c',
          waiting: 'once',
          holdId: 'h',
        });
      expect((await attempt(5000))[0]).toBe('granted');
      await redis.pexpire(k.lock, 60_000); // renewed by its watchdog meanwhile
      expect((await attempt(5000))[0]).toBe('granted');
      expect(await redis.pttl(k.lock)).toBeGreaterThan(50_000);
      expect(await redis.hgetall(k.lock)).toEqual({ o: '1' });
    });

    it('pass-wake-4: run twice, it hands the lock over once and the reservation stays with the process woken', async () => {
      const k = lockKeys(prefix, `t${++n}`);
      const sub = redis.duplicate();
      const heard: string[] = [];
      sub.on('message', (channel: string) => heard.push(channel.slice(k.channel.length + 1)));
      await sub.subscribe(`${k.channel}:p1`, `${k.channel}:p2`);
      try {
        const wait = (owner: string, client: string) =>
          LOCK.run(redis, k, {
            idleKeyTtl: IDLE_KEY_TTL,
            leaseMs: 5000,
            owner,
            clientId: client,
            waiting: '0',
            holdId: `h-${owner}`,
          });
        await wait('p0:a', 'p0');
        await wait('p1:x', 'p1');
        await wait('p2:x', 'p2');
        await UNLOCK.run(redis, k, {
          owner: 'p0:a',
          holdId: 'h-p0:a',
          leaseMs: 5000,
          publish: 'publish',
          message: 'm',
          handOver: 'pass',
          clientId: 'p0',
          which: 'one',
          turnMs: 0,
        });
        await redis.pexpire(k.next, 10_000);
        expect(await redis.get(k.next)).toBe('pass:p1');
        const pass = () => PASS_WAKE.run(redis, k, { clientId: 'p1', publish: 'publish', message: 'm' });
        expect(await pass()).toBe(true); // p1 passes: p2 is woken and the lock reserved for it
        expect(await redis.get(k.next)).toBe('pass:p2');
        // A reservation lasts HAND_OVER_MS (50 ms): a slow machine's round trips must not outlast it.
        await redis.pexpire(k.next, 10_000);
        expect(await pass()).toBe(false); // the copy: reserved for p2, nothing else changes
        expect(await redis.get(k.next)).toBe('pass:p2');
        expect(await redis.zrange(k.waiting, 0, -1)).toEqual(['p2']);
        await new Promise((r) => setTimeout(r, 50));
        expect(heard).toEqual(['p1', 'p2']);
      } finally {
        await sub.quit();
      }
    });
  });

  describe('read-write lock', () => {
    const writeAttempt = (k: RwKeys, owner: string, holdId: string, leaseMs = 5000, intentMs = 0, waitId = 'wait') =>
      WRITE_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs, owner, intentMs, holdId, waitId });
    const readAttempt = (k: RwKeys, owner: string, holdId: string, leaseMs = 5000) =>
      READ_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs, owner, holdId });

    it('rw-write-lock-7: a repeat never shortens the lease nor advances the fencing counter', async () => {
      const k = rwKeys();
      await seedFence(redis, k.fence);
      expect(await writeAttempt(k, 'w', 'h1', 60_000)).toEqual(['granted', FENCE_SEED + 1]);
      expect(await writeAttempt(k, 'w', 'h1', 1000)).toEqual(['granted', FENCE_SEED + 1]);
      expect(await redis.pttl(k.write)).toBeGreaterThan(50_000);
      expect(await redis.get(k.fence)).toBe(String(FENCE_SEED + 1));
      expect(await redis.hgetall(k.write)).toEqual({ w: '1' });
    });

    it('rw-write-lock-7: a refused waiting writer run twice keeps one intent and takes nothing', async () => {
      const k = rwKeys();
      await readAttempt(k, 'r', 'r1');
      const [a, b] = await twice(() => writeAttempt(k, 'w', 'w1', 5000, 3000));
      expect(a[0]).toBe('refused');
      expect(b[0]).toBe('refused');
      expect(await redis.zrange(k.writers, 0, -1)).toEqual(['w\0wait']);
      expect(await redis.exists(k.write)).toBe(0);
    });

    it('rw-read-lock-6: a repeat never shortens the read hold', async () => {
      const k = rwKeys();
      expect((await readAttempt(k, 'r', 'r1', 60_000))[0]).toBe('granted');
      const expiry = await redis.zscore(k.readers, 'r');
      expect((await readAttempt(k, 'r', 'r1', 1000))[0]).toBe('granted');
      expect(await redis.zscore(k.readers, 'r')).toBe(expiry);
      expect(await redis.hget(k.readCounts, 'r')).toBe('1');
    });

    it('rw-write-abandon-3: run twice, readers are woken once and a newer intent stays', async () => {
      const k = rwKeys();
      const sub = redis.duplicate();
      const heard: string[] = [];
      sub.on('message', (_channel: string, message: string) => heard.push(message));
      await sub.subscribe(k.readChannel);
      try {
        await readAttempt(k, 'r', 'r1');
        await writeAttempt(k, 'w', 'w1', 5000, 3000);
        const abandon = () => WRITE_ABANDON.run(redis, k, { owner: 'w', publish: 'publish', waitId: 'wait' });
        expect(await twice(abandon)).toEqual([true, false]);
        await new Promise((r) => setTimeout(r, 50));
        expect(heard).toEqual(['writer-gone']);
        await writeAttempt(k, 'x', 'x1', 5000, 3000);
        expect(await abandon()).toBe(false); // another writer's intent is never touched
        expect(await redis.zrange(k.writers, 0, -1)).toEqual(['x\0wait']);
      } finally {
        await sub.quit();
      }
    });

    it("rw-write-abandon-3: a late copy leaves the same owner's next wait waiting, new readers held back", async () => {
      const k = rwKeys();
      await readAttempt(k, 'r', 'r1');
      const abandon = (waitId: string) => WRITE_ABANDON.run(redis, k, { owner: 'w', publish: 'publish', waitId });
      expect((await writeAttempt(k, 'w', 'w1', 5000, 3000, 'wait1'))[0]).toBe('refused');
      expect(await abandon('wait1')).toBe(true);
      // The same owner waits again (a retry), and then the copy of the first abandon arrives.
      expect((await writeAttempt(k, 'w', 'w2', 5000, 3000, 'wait2'))[0]).toBe('refused');
      expect(await abandon('wait1')).toBe(false);
      expect(await redis.zrange(k.writers, 0, -1)).toEqual(['w\0wait2']);
      expect((await readAttempt(k, 'r2', 'r2'))[0]).toBe('refused');
    });

    it('rw-read-claim-3: run twice, a landed hold is claimed twice with the same reply and counted once', async () => {
      const k = rwKeys();
      const [, token] = await readAttempt(k, 'r', 'landed');
      await readAttempt(k, 'r', 'again');
      const claim = (holdId: string) => READ_CLAIM_ATTEMPT.run(redis, k, { holdId, owner: 'r' });
      expect(await twice(() => claim('landed'))).toEqual([
        ['granted', token],
        ['granted', token],
      ]);
      expect(await twice(() => claim('again'))).toEqual([
        ['reentered', token],
        ['reentered', token],
      ]);
      expect(await twice(() => claim('lost'))).toEqual([['cancelled'], ['cancelled']]);
      expect((await readAttempt(k, 'r', 'lost'))[0]).toBe('refused');
      expect(await redis.hget(k.readCounts, 'r')).toBe('2');
    });

    it('rw-force-unlock-8 (read side): the repeat leaves the readers that came in between, and replies as the first run did', async () => {
      const k = rwKeys();
      const force = (callId: string) =>
        READ_WRITE_FORCE_UNLOCK.run(redis, k, { side: 'read', publish: 'publish', callId });
      await readAttempt(k, 'r1', 'a');
      await readAttempt(k, 'r2', 'b');
      expect(await force('f1')).toBe(true);
      expect(await redis.exists(k.readers, k.readCounts)).toBe(0);
      await readAttempt(k, 'r3', 'c');
      expect(await force('f1')).toBe(true);
      expect(await redis.hgetall(k.readCounts)).toEqual({ r3: '1' });
      expect(await redis.zrange(k.readers, 0, -1)).toEqual(['r3']);
      expect(await twice(() => force('f2'))).toEqual([true, true]);
      expect(await twice(() => force('f3'))).toEqual([false, false]);
      await readAttempt(k, 'r4', 'd');
      expect(await force('f3')).toBe(false);
      expect(await redis.hgetall(k.readCounts)).toEqual({ r4: '1' });
    });
  });
});
