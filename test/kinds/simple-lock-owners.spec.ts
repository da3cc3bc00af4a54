import { randomUUID } from 'node:crypto';
import { LockNotHeldError, LockOptionsError, lockKeys, type LockHandle } from '../../lib/internal';
import { SIMPLE_LOCK, SIMPLE_UNLOCK } from '../../lib/engine/scripts/catalog';
import { runScriptUnchecked } from '../../lib/engine/scripts/loader';
import { connect, lockClient, testPrefix, type TestClient } from '../support/engine';
import type Redis from 'ioredis';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';

/**
 * An owner id is opaque text (issue #38): never parsed, never matched by prefix, any characters
 * allowed. `unlock({ owner })` releases exactly that owner's hold, whichever client took it, and a
 * holder whose owner id merely starts or ends like the one named is left alone.
 */
describe('SimpleLock: a release by owner names exactly one owner', () => {
  const prefix = testPrefix();
  let client: TestClient;
  let other: TestClient;
  let name: string;
  const lost: unknown[] = [];

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix });
    other = lockClient({ keyPrefix: prefix });
    for (const c of [client, other]) c.locks.on('lockLost', (error) => lost.push(error));
  });
  beforeEach(() => {
    name = `owners-${Math.random().toString(36).slice(2)}`;
    lost.length = 0;
  });
  afterAll(async () => {
    await client.close();
    await other.close();
  });

  const holds = async (c: TestClient, handle: LockHandle) =>
    (await c.redis.get(c.locks.getSimpleLock(handle.name).keys.lock)) === handle.owner;

  it.each([
    ['this client', () => client],
    ['another client', () => other],
  ])("unlock({ owner: 'job' }) from %s leaves the hold of 'job:2'", async (_where, releaser) => {
    const held = await client.locks.getSimpleLock(name).lock({ owner: 'job:2', leaseTime: 10_000 });
    await expect(releaser().locks.getSimpleLock(name).unlock({ owner: 'job' })).rejects.toBeInstanceOf(
      LockNotHeldError,
    );
    expect(await holds(client, held)).toBe(true);
    expect(held.signal.aborted).toBe(false);
    expect(await held.release()).toBe('released');
    expect(lost).toEqual([]);
  });

  it("unlock({ owner: 'job:2' }) from another client releases the hold 'job:2' took", async () => {
    const held = await client.locks.getSimpleLock(name).lock({ owner: 'job:2', leaseTime: 10_000 });
    expect(await other.locks.getSimpleLock(name).unlock({ owner: 'job:2' })).toBe('released');
    expect(await other.locks.getSimpleLock(name).isLocked()).toBe(false);
    // Released under it by another client: the holder learns it no longer holds the lock.
    expect(await held.release()).toBe('expired');
    await expect(other.locks.getSimpleLock(name).unlock({ owner: 'job:2' })).rejects.toBeInstanceOf(LockNotHeldError);
  });

  it.each(['a:b', 'a:{b}', '{x} y:', ':', '}{', 'job 2: {retry}'])(
    'owner %p: only that exact id releases it, from either client',
    async (owner) => {
      const nearMisses = [owner.slice(0, -1), owner.slice(1), `${owner}:`, `:${owner}`, `${owner} `].filter(
        (miss) => miss !== '' && miss !== owner,
      );
      for (const releaser of [client, other]) {
        const held = await client.locks.getSimpleLock(name).lock({ owner, leaseTime: 10_000 });
        for (const miss of nearMisses) {
          await expect(releaser.locks.getSimpleLock(name).unlock({ owner: miss })).rejects.toBeInstanceOf(
            LockNotHeldError,
          );
        }
        expect(await holds(client, held)).toBe(true);
        expect(await releaser.locks.getSimpleLock(name).unlock({ owner })).toBe('released');
        expect(await client.locks.getSimpleLock(name).isLocked()).toBe(false);
      }
    },
  );

  it('a holder whose owner id contains the released owner anywhere is left alone', async () => {
    const owner = 'job';
    for (const holder of ['job:2', '2:job', 'a:job:b', `${randomUUID()}:job`]) {
      const held = await other.locks.getSimpleLock(name).lock({ owner: holder, leaseTime: 10_000 });
      await expect(client.locks.getSimpleLock(name).unlock({ owner })).rejects.toBeInstanceOf(LockNotHeldError);
      await expect(other.locks.getSimpleLock(name).unlock({ owner })).rejects.toBeInstanceOf(LockNotHeldError);
      expect(await holds(other, held)).toBe(true);
      expect(await held.release()).toBe('released');
    }
    expect(lost).toEqual([]);
  });

  it('an owner that is not a non-empty string is refused before any Redis call', async () => {
    const lock = client.locks.getSimpleLock(name);
    for (const owner of ['', 'a\0b', 42 as unknown as string]) {
      await expect(lock.unlock({ owner })).rejects.toBeInstanceOf(LockOptionsError);
    }
  });
});

/** The release script on its own: a repeat of a release that landed changes nothing, whoever holds the lock by then. */
describe('simple-unlock-5: a release runs once', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const keysOf = () => {
    const keys = lockKeys(prefix, `once-${++n}`);
    return { ...keys, released: `${keys.lock}:releases` };
  };
  type Keys = ReturnType<typeof keysOf>;
  const take = (k: Keys, token: string) =>
    SIMPLE_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, token, leaseMs: 10_000, clientId: 'c', waiting: 'once' });
  const release = (k: Keys, by: { token: string } | { owner: string; callId: string }) =>
    SIMPLE_UNLOCK.run(redis, k, {
      token: 'token' in by ? by.token : '',
      owner: 'owner' in by ? by.owner : '',
      callId: 'callId' in by ? by.callId : '',
      publish: 'publish',
      message: 'released',
      handOver: 'pass',
      clientId: 'c',
      turnMs: 0,
    });
  const token = (owner: string) => `${randomUUID()}:${owner}`;

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  it("a token's release sent again after another took the lock: 'released', the new hold stays", async () => {
    const k = keysOf();
    const [first, second] = [token('job'), token('job')];
    expect((await take(k, first))[0]).toBe('granted');
    expect(await release(k, { token: first })).toBe('released');
    expect((await take(k, second))[0]).toBe('granted');
    expect(await release(k, { token: first })).toBe('released');
    expect(await redis.get(k.lock)).toBe(second);
    expect(await release(k, { token: token('job') })).toBe('not-owner'); // a token never released
  });

  it("a release by owner sent again after that owner took the lock again: 'released', the new hold stays", async () => {
    const k = keysOf();
    const callId = randomUUID();
    expect((await take(k, token('job:2')))[0]).toBe('granted');
    expect(await release(k, { owner: 'job', callId: randomUUID() })).toBe('not-owner');
    expect(await release(k, { owner: 'job:2', callId })).toBe('released');
    const again = token('job:2');
    expect((await take(k, again))[0]).toBe('granted');
    expect(await release(k, { owner: 'job:2', callId })).toBe('released');
    expect(await redis.get(k.lock)).toBe(again);
    expect(await release(k, { owner: 'job:2', callId: randomUUID() })).toBe('released'); // a new call
    expect(await release(k, { owner: 'job:2', callId: randomUUID() })).toBe('not-locked');
  });

  it('a hold that names no owner (a bare id, lent in its process) is released by its token only', async () => {
    const k = keysOf();
    const bare = randomUUID();
    expect((await take(k, bare))[0]).toBe('granted');
    for (const owner of [bare, bare.slice(1), bare.slice(-1), '-']) {
      expect(await release(k, { owner, callId: randomUUID() })).toBe('not-owner');
    }
    expect(await release(k, { token: bare })).toBe('released');
  });

  it('unusable arguments: BADARG, and nothing changed', async () => {
    const k = keysOf();
    const held = token('job');
    await take(k, held);
    const keys = [k.lock, k.channel, k.waiting, k.next, k.released];
    for (const args of [
      ['', '', '', 'publish', 'm', 'pass', 'c'], // neither a token nor an owner
      [held, 'job', randomUUID(), 'publish', 'm', 'pass', 'c'], // both
      ['', 'job', '', 'publish', 'm', 'pass', 'c'], // a release by owner without its call id
      [held, '', '', 'del', 'm', 'pass', 'c'],
      [held, '', '', 'publish', 'm', 'hold', 'c'],
      [held, '', '', 'publish', 'm', 'keep', ''],
      [held, 'publish', 'm', 'pass', 'c'], // the layout before owner ids
    ]) {
      await expect(runScriptUnchecked(redis, 'simple-unlock-5.lua', keys, args)).rejects.toThrow(/BADARG/);
    }
    expect(await redis.get(k.lock)).toBe(held);
    expect(await redis.exists(k.released)).toBe(0);
  });

  it('the record of releases lives a minute after the latest and keeps the newest 1000', async () => {
    const k = keysOf();
    for (let i = 0; i < 1_005; i++) {
      const t = token(`o${i}`);
      await take(k, t);
      await release(k, { token: t });
    }
    expect(await redis.zcard(k.released)).toBe(1_000);
    const ttl = await redis.pttl(k.released);
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });
});
