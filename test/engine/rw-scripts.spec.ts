import { readWriteKeys } from '../../lib/internal';
import {
  CLAIM_ATTEMPT,
  READ_CLAIM_ATTEMPT,
  READ_LOCK,
  READ_UNLOCK,
  READ_WRITE_FORCE_UNLOCK,
  WRITE_LOCK,
  WRITE_UNLOCK,
} from '../../lib/engine/scripts/catalog';
import { connect, sleep, testPrefix } from '../support/engine';
import type Redis from 'ioredis';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';

/**
 * The read-write lock's scripts called directly on a real Redis: every hold of either side has an id of
 * its own (lua/include/hold-ids.lua), as lock-5 / unlock-6 give the reentrant lock's (see scripts.spec.ts).
 */
describe('read-write lock scripts: every hold has an id of its own', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const fresh = () => readWriteKeys(prefix, `rw${++n}`);
  type Keys = ReturnType<typeof fresh>;

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  /** One side's scripts, so that each rule below is checked on both. */
  interface Side {
    name: 'write' | 'read';
    attempt(k: Keys, owner: string, holdId: string, leaseMs?: number): Promise<[string, number]>;
    release(k: Keys, owner: string, holdId: string, which?: 'one' | 'any'): Promise<string>;
    claim(k: Keys, owner: string, holdId: string): Promise<unknown>;
    count(k: Keys, owner: string): Promise<string | null>;
  }
  const write: Side = {
    name: 'write',
    attempt: (k, owner, holdId, leaseMs = 5000) =>
      WRITE_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs, owner, intentMs: 0, holdId, waitId: 'w' }),
    release: (k, owner, holdId, which = 'one') =>
      WRITE_UNLOCK.run(redis, k, { owner, holdId, leaseMs: 5000, publish: 'publish', which }),
    claim: (k, owner, holdId) =>
      CLAIM_ATTEMPT.run(
        redis,
        { lock: k.write, grants: k.writeGrants, fence: k.fence },
        { holdId, owner, leaseMs: 5000, idleKeyTtl: IDLE_KEY_TTL },
      ),
    count: (k, owner) => redis.hget(k.write, owner),
  };
  const read: Side = {
    name: 'read',
    attempt: (k, owner, holdId, leaseMs = 5000) =>
      READ_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs, owner, holdId }),
    release: (k, owner, holdId, which = 'one') =>
      READ_UNLOCK.run(redis, k, { owner, holdId, leaseMs: 5000, publish: 'publish', which }),
    claim: (k, owner, holdId) => READ_CLAIM_ATTEMPT.run(redis, k, { holdId, owner }),
    count: (k, owner) => redis.hget(k.readCounts, owner),
  };

  describe.each([write, read])('$name side', (side) => {
    it('a repeated attempt replies as its first run did and counts nothing; another attempt of the same owner, from any process, counts one more', async () => {
      const k = fresh();
      const [status, token] = await side.attempt(k, 'job-8', 'b1');
      expect(status).toBe('granted');
      expect(await side.attempt(k, 'job-8', 'b1')).toEqual(['granted', token]); // the repeat
      expect(await side.count(k, 'job-8')).toBe('1');
      // Process A takes the same explicit owner: a re-entry, counted, whatever A remembers.
      expect(await side.attempt(k, 'job-8', 'a1')).toEqual(['reentered', token]);
      expect(await side.attempt(k, 'job-8', 'a1')).toEqual(['reentered', token]);
      expect(await side.count(k, 'job-8')).toBe('2');
      // A's release (and its repeat) leaves B's hold.
      expect(await side.release(k, 'job-8', 'a1')).toBe('decremented');
      expect(await side.release(k, 'job-8', 'a1')).toBe('decremented');
      expect(await side.count(k, 'job-8')).toBe('1');
      // B's release frees it; an old copy of it, after B took the lock anew, leaves the new hold.
      expect(await side.release(k, 'job-8', 'b1')).toBe('released');
      expect((await side.attempt(k, 'job-8', 'b2'))[0]).toBe('granted');
      expect(await side.release(k, 'job-8', 'b1')).toBe('released');
      expect(await side.count(k, 'job-8')).toBe('1');
      // A late copy of an attempt whose hold ended takes nothing.
      expect((await side.attempt(k, 'job-8', 'a1'))[0]).toBe('refused');
      expect(await side.count(k, 'job-8')).toBe('1');
    });

    it('a release names its hold: a hold of another owner, or an unknown id, is never touched', async () => {
      const k = fresh();
      await side.attempt(k, 'order:1', 'o1');
      expect(await side.release(k, 'order:2', 'o1')).toBe('not-owner');
      expect(await side.release(k, 'order:1', 'nobody')).toBe('not-owner');
      expect(await side.count(k, 'order:1')).toBe('1');
      // The unknown id is now cancelled: an attempt arriving with it later takes nothing.
      expect((await side.attempt(k, 'order:1', 'nobody'))[0]).toBe('refused');
      expect(await side.count(k, 'order:1')).toBe('1');
    });

    it("unlock by owner ('any') ends one hold of exactly that owner under the call's id; its repeat changes nothing", async () => {
      const k = fresh();
      await side.attempt(k, 'job:2', 'j1');
      expect(await side.release(k, 'job', 'c0', 'any')).toBe('not-owner'); // a prefix is another owner
      await side.attempt(k, 'job:2', 'j2');
      expect(await side.release(k, 'job:2', 'call-1', 'any')).toBe('decremented');
      expect(await side.release(k, 'job:2', 'call-1', 'any')).toBe('decremented'); // re-sent after a lost reply
      expect(await side.count(k, 'job:2')).toBe('1');
      expect(await side.release(k, 'job:2', 'call-2', 'any')).toBe('released');
      expect(await side.release(k, 'job:2', 'call-2', 'any')).toBe('released');
      expect(await side.count(k, 'job:2')).toBeNull();
      // The holders' own releases find their holds ended by those calls: nothing more to release.
      expect(await side.release(k, 'job:2', 'j1')).toBe('released');
      expect(await side.release(k, 'job:2', 'j2')).toBe('released');
    });

    it('claims an unanswered attempt that landed, else cancels it for good', async () => {
      const k = fresh();
      const [, token] = await side.attempt(k, 'o', 'landed');
      expect(await side.claim(k, 'o', 'landed')).toEqual(['granted', token]);
      expect(await side.claim(k, 'other', 'landed')).toEqual(['cancelled']); // another owner's hold
      expect(await side.claim(k, 'o', 'late')).toEqual(['cancelled']);
      expect((await side.attempt(k, 'o', 'late'))[0]).toBe('refused'); // the late copy takes nothing
      expect(await side.count(k, 'o')).toBe('1');
      await expect(side.claim(k, 'o', '')).rejects.toThrow(/BADARG hold id/);
    });

    it('a hold whose lease ran out never counts again, even when its owner holds the lock anew', async () => {
      const k = fresh();
      await side.attempt(k, 'job-9', 'old', 50);
      await sleep(120); // ran out, and nobody released it
      expect((await side.attempt(k, 'job-9', 'new'))[0]).toBe('granted');
      expect(await side.release(k, 'job-9', 'old')).toBe('not-owner'); // the late release of the old hold
      expect((await side.attempt(k, 'job-9', 'old'))[0]).toBe('refused'); // a late copy of its attempt
      expect(await side.claim(k, 'job-9', 'old')).toEqual(['cancelled']);
      expect(await side.count(k, 'job-9')).toBe('1');
      expect(await side.release(k, 'job-9', 'new')).toBe('released');
      expect(await side.count(k, 'job-9')).toBeNull();
    });

    it('a force unlock ends the hold ids of its side with the holds (kept a minute for repeats)', async () => {
      const k = fresh();
      await side.attempt(k, 'o', 'f1');
      const grants = side.name === 'write' ? k.writeGrants : k.readGrants;
      const other = side.name === 'write' ? k.readGrants : k.writeGrants;
      await redis.hset(other, 'kept', 'r');
      expect(await redis.exists(grants)).toBe(1);
      expect(await READ_WRITE_FORCE_UNLOCK.run(redis, k, { side: side.name, publish: 'publish', callId: 'f' })).toBe(
        true,
      );
      expect(await redis.hgetall(grants)).toEqual({ f1: 'x' });
      expect(await redis.pttl(grants)).toBeLessThanOrEqual(60_000);
      expect(await redis.hgetall(other)).toEqual({ kept: 'r' });
      expect(await side.release(k, 'o', 'f1')).toBe('not-locked');
    });
  });

  it('read holds that ran out keep the read keys alive until a script has ended their records', async () => {
    const k = fresh();
    await read.attempt(k, 'gone', 'g1', 50);
    await sleep(120);
    // No live reader: the lock is free, yet the keys stay as long as the hold ids do…
    expect(await redis.exists(k.readers)).toBe(1);
    expect(await redis.pttl(k.readers)).toBeGreaterThan(30_000);
    expect((await write.attempt(k, 'w', 'w1'))[0]).toBe('granted');
    // …and the writer's attempt pruned the hold, ending its record.
    expect(await redis.hget(k.readGrants, 'g1')).toBe('x');
    expect(await redis.exists(k.readers, k.readCounts)).toBe(0);
  });

  it('a writer that holds the write side may read; its own repeats and releases never touch the other side', async () => {
    const k = fresh();
    const [, token] = await write.attempt(k, 'w', 'w1');
    expect(await read.attempt(k, 'w', 'r1')).toEqual(['granted', token]);
    expect(await read.attempt(k, 'w', 'r1')).toEqual(['granted', token]);
    expect(await write.release(k, 'w', 'r1')).toBe('not-owner'); // a read hold's id names no write hold
    expect(await write.count(k, 'w')).toBe('1');
    expect(await write.release(k, 'w', 'w1')).toBe('released');
    expect(await read.count(k, 'w')).toBe('1');
    expect((await write.attempt(k, 'x', 'x1'))[0]).toBe('refused'); // still read-locked
    expect(await read.release(k, 'w', 'r1')).toBe('released');
    expect((await write.attempt(k, 'x', 'x2'))[0]).toBe('granted');
  });

  it("waits of one owner keep an intent each: a grant or a re-entry ends only its own wait's", async () => {
    const k = fresh();
    const wait = (holdId: string, waitId: string) =>
      WRITE_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner: 'w', intentMs: 3000, holdId, waitId });
    await write.attempt(k, 'x', 'x1');
    for (const waitId of ['A', 'B', 'C']) expect((await wait(`${waitId}1`, waitId))[0]).toBe('refused');
    expect(await redis.zrange(k.writers, 0, -1)).toEqual(['w\0A', 'w\0B', 'w\0C']);
    expect(await write.release(k, 'x', 'x1')).toBe('released');
    expect((await wait('A2', 'A'))[0]).toBe('granted');
    expect((await wait('B2', 'B'))[0]).toBe('reentered');
    expect(await redis.zrange(k.writers, 0, -1)).toEqual(['w\0C']);
    expect(await write.release(k, 'w', 'A2')).toBe('decremented');
    expect(await write.release(k, 'w', 'B2')).toBe('released');
    expect((await read.attempt(k, 'r', 'r1'))[0]).toBe('refused'); // wait C still holds new readers back
  });
});
