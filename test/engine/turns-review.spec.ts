import type Redis from 'ioredis';
import { lockKeys } from '../../lib/internal';
import {
  CLAIM_ATTEMPT,
  FORCE_UNLOCK,
  PASS_WAKE,
  LOCK,
  SIMPLE_LOCK,
  SIMPLE_UNLOCK,
  UNLOCK,
} from '../../lib/engine/scripts/catalog';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import { connect, testPrefix } from '../support/engine';

/**
 * Review of the reentrant lock's hold ids against repeats (a command re-sent after a lost reply) that
 * come late: after a forceUnlock, or after the owner took the lock again.
 */
describe('reentrant lock: late repeats of attempts and releases', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  type Keys = ReturnType<typeof lockKeys>;
  const attempt = (k: Keys, owner: string, holdId: string, client = 'c', waiting: 'once' | '0' = 'once') =>
    LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 30_000, owner, clientId: client, waiting, holdId });
  /** `turn`: as a process `client` sends it, inside a turn ('keep': reserved for it `turnMs` more) or not. */
  const release = (
    k: Keys,
    owner: string,
    holdId: string,
    which: 'one' | 'any' = 'one',
    turn: { client: string; handOver: 'keep' | 'pass'; turnMs: number } = { client: 'c', handOver: 'pass', turnMs: 0 },
  ) =>
    UNLOCK.run(redis, k, {
      owner,
      holdId,
      leaseMs: 30_000,
      publish: 'publish',
      message: 'released',
      handOver: turn.handOver,
      clientId: turn.client,
      which,
      turnMs: turn.turnMs,
    });

  it('lock-5 sent again after claim-attempt cancelled it and a forceUnlock came takes nothing', async () => {
    const k = lockKeys(prefix, `force-${++n}`);
    expect((await attempt(k, 'b', 'hb'))[0]).toBe('granted');
    // a's attempt is unanswered: a's client cancels it before its next one.
    expect(
      await CLAIM_ATTEMPT.run(redis, k, { holdId: 'ha', owner: 'a', leaseMs: 30_000, idleKeyTtl: 60_000 }),
    ).toEqual(['cancelled']);
    expect(await FORCE_UNLOCK.run(redis, k, { publish: 'publish', message: 'force', callId: 'f1' })).toBe(true);
    // The cancelled attempt's copy arrives: it must take nothing.
    expect((await attempt(k, 'a', 'ha'))[0]).toBe('refused');
    expect(await redis.exists(k.lock)).toBe(0);
  });

  it("unlock-6 'any' sent again after a forceUnlock and a new grant of the owner ends no hold of it", async () => {
    const k = lockKeys(prefix, `force-any-${++n}`);
    expect((await attempt(k, 'job', 'h1'))[0]).toBe('granted');
    expect((await attempt(k, 'job', 'h2'))[0]).toBe('reentered');
    // A canceller releases one hold of the job; its reply is lost, so it is sent again later.
    expect(await release(k, 'job', 'call-1', 'any')).toBe('decremented');
    expect(await FORCE_UNLOCK.run(redis, k, { publish: 'publish', message: 'force', callId: 'f2' })).toBe(true);
    expect((await attempt(k, 'job', 'h3'))[0]).toBe('granted'); // the job runs again
    // The copy answers as its first copy did, and leaves the job's new hold alone.
    expect(await release(k, 'job', 'call-1', 'any')).toBe('decremented');
    expect(await redis.hget(k.lock, 'job')).toBe('1');
  });

  it("unlock-6 'any' that found the owner holding nothing, sent again after the owner took the lock, ends no hold", async () => {
    const k = lockKeys(prefix, `none-${++n}`);
    // The canceller's call lands while the job holds nothing; its reply is lost.
    expect(await release(k, 'job', 'call-2', 'any')).toBe('not-locked');
    expect((await attempt(k, 'job', 'h1'))[0]).toBe('granted'); // the job runs again
    // The copy ends nothing: the lock is held now, by the job's new hold, not by this call's.
    expect(await release(k, 'job', 'call-2', 'any')).toBe('not-owner');
    expect(await redis.hget(k.lock, 'job')).toBe('1');
  });

  it("unlock-6 'any' whose target had run out, sent again after the owner took the lock, ends no hold", async () => {
    const k = lockKeys(prefix, `ended-${++n}`);
    expect((await attempt(k, 'job', 'h1'))[0]).toBe('granted');
    await redis.del(k.lock); // ran out: the record of h1 is still there, its owner's field is not
    expect(await release(k, 'job', 'call-3', 'any')).toBe('not-locked');
    expect((await attempt(k, 'job', 'h2'))[0]).toBe('granted');
    expect(await release(k, 'job', 'call-3', 'any')).toBe('not-owner');
    expect(await redis.hget(k.lock, 'job')).toBe('1');
  });

  it("unlock-6 'any' sent again after the owner re-entered its lock many times ends no second hold", async () => {
    const k = lockKeys(prefix, `any-churn-${++n}`);
    expect((await attempt(k, 'job', 'h1'))[0]).toBe('granted'); // the job's process holds h1
    expect((await attempt(k, 'job', 'h2'))[0]).toBe('reentered');
    // A canceller elsewhere releases one hold of the job; its reply is lost, so it is sent again.
    expect(await release(k, 'job', 'call-4', 'any')).toBe('decremented');
    // Meanwhile the job goes on re-entering its lock (nested sections in a loop): the ended records
    // of those re-entries are pruned past 256 records.
    for (let i = 0; i < 300; i++) {
      expect((await attempt(k, 'job', `r-${i}`))[0]).toBe('reentered');
      expect(await release(k, 'job', `r-${i}`)).toBe('decremented');
    }
    // The copy of the canceller's call changes nothing: h1 is still the job's.
    expect(await release(k, 'job', 'call-4', 'any')).toBe('decremented');
    expect(await redis.hget(k.lock, 'job')).toBe('1');
  });

  it('simple-unlock-5 by owner that found the owner holding nothing, sent again after the owner took the lock, ends no hold', async () => {
    const k = lockKeys(prefix, `simple-none-${++n}`);
    const keys = { ...k, released: `${k.lock}:releases` };
    const byOwner = () =>
      SIMPLE_UNLOCK.run(redis, keys, {
        token: '',
        owner: 'job',
        callId: 'call-5',
        publish: 'publish',
        message: 'released',
        handOver: 'pass',
        clientId: 'c',
        turnMs: 0,
      });
    expect(await byOwner()).toBe('not-locked'); // its reply is lost
    const token = `${'0'.repeat(36)}:job`;
    const take = { idleKeyTtl: IDLE_KEY_TTL, token, leaseMs: 30_000, clientId: 'c', waiting: 'once' as const };
    expect((await SIMPLE_LOCK.run(redis, keys, take))[0]).toBe('granted'); // the job runs again
    expect(await byOwner()).toBe('not-owner'); // the copy ends nothing
    expect(await redis.get(k.lock)).toBe(token);
  });

  describe('copies of turn scripts interleaved with other processes', () => {
    const wait = (k: Keys, owner: string, holdId: string, client: string) => attempt(k, owner, holdId, client, '0');
    const releaseAs = (k: Keys, owner: string, holdId: string, client: string, handOver: 'keep' | 'pass') =>
      release(k, owner, holdId, 'one', { client, handOver, turnMs: 5_000 });

    it("a copy of a release kept in P's turn, after Q took the lock, leaves Q's hold and reserves nothing", async () => {
      const k = lockKeys(prefix, `kept-copy-${++n}`);
      expect((await wait(k, 'p:1', 'hp', 'P'))[0]).toBe('granted');
      expect((await wait(k, 'q:1', 'hq', 'Q'))[0]).toBe('refused'); // Q registers
      expect(await releaseAs(k, 'p:1', 'hp', 'P', 'keep')).toBe('kept');
      expect(await redis.get(k.next)).toBe('turn:P');
      await redis.del(k.next); // the turn's reservation ran out
      expect((await wait(k, 'q:1', 'hq2', 'Q'))[0]).toBe('granted');
      expect(await releaseAs(k, 'p:1', 'hp', 'P', 'keep')).toBe('released'); // the copy
      expect(await redis.hgetall(k.lock)).toEqual({ 'q:1': '1' });
      expect(await redis.exists(k.next)).toBe(0);
    });

    it('a copy of a release that passed the lock on hands it over once; a pass-wake between changes nothing', async () => {
      const k = lockKeys(prefix, `pass-copy-${++n}`);
      const sub = redis.duplicate();
      const heard: string[] = [];
      sub.on('message', (channel: string) => heard.push(channel.slice(k.channel.length + 1)));
      await sub.subscribe(`${k.channel}:Q`, `${k.channel}:R`);
      try {
        expect((await wait(k, 'p:1', 'hp', 'P'))[0]).toBe('granted');
        expect((await wait(k, 'q:1', 'hq', 'Q'))[0]).toBe('refused');
        expect((await wait(k, 'r:1', 'hr', 'R'))[0]).toBe('refused');
        expect(await releaseAs(k, 'p:1', 'hp', 'P', 'pass')).toBe('released');
        // The reservation lasts HAND_OVER_MS (50 ms): a slow machine's round trips must not outlast it.
        expect(await Promise.all([redis.get(k.next), redis.pexpire(k.next, 10_000)])).toEqual(['pass:Q', 1]);
        expect(await PASS_WAKE.run(redis, k, { clientId: 'P', publish: 'publish', message: 'released' })).toBe(false);
        expect(await releaseAs(k, 'p:1', 'hp', 'P', 'pass')).toBe('released'); // the copy
        expect(await redis.get(k.next)).toBe('pass:Q');
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(heard).toEqual(['Q']);
      } finally {
        await sub.quit();
      }
    });

    it("a copy of an attempt granted on P's hand-over, after P released in its turn, takes nothing and leaves the turn", async () => {
      const k = lockKeys(prefix, `attempt-copy-${++n}`);
      await redis.set(k.next, 'pass:P', 'PX', 5_000);
      expect((await wait(k, 'q:1', 'hq', 'Q'))[0]).toBe('refused');
      expect((await wait(k, 'p:1', 'hp', 'P'))[0]).toBe('granted');
      expect(await releaseAs(k, 'p:1', 'hp', 'P', 'keep')).toBe('kept');
      expect((await wait(k, 'p:1', 'hp', 'P'))[0]).toBe('refused'); // the copy
      expect(await redis.exists(k.lock)).toBe(0);
      expect(await redis.get(k.next)).toBe('turn:P');
      expect(
        await CLAIM_ATTEMPT.run(redis, k, { holdId: 'hp', owner: 'p:1', leaseMs: 30_000, idleKeyTtl: 60_000 }),
      ).toEqual(['cancelled']);
      expect(await redis.hget(k.grants, 'hp')).toBe('r'); // the claim keeps what the release recorded
    });
  });
});
