import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { createLockClient, LockClient } from '../../lib';
import { readWriteKeys } from '../../lib/internal';
import { eventually, quietLogger, sleep } from '../support/engine';
import { useIdentityWorld, type IdentityWorld } from '../support/identity-world';
import { sharedTopology } from '../support/topologies';

/**
 * Identity by id (issue 38) for both sides of the read-write lock, as test/engine/identity.spec.ts
 * checks it for the reentrant lock: explicit owners shared across clients (two LockClients stand for
 * two processes), replies lost between Redis and the client, and the application's own ioredis client
 * re-sending what it sent. Every hold of either side has an id of its own; a release names the hold it
 * ends; a repeat is recognised by its id, never by a count a client remembers.
 */
describe.each(['write', 'read'] as const)('identity by id: the %s side of a read-write lock', (side) => {
  const keyPrefix = `rwid-${randomUUID().slice(0, 8)}`;

  const world = useIdentityWorld(keyPrefix);

  const client = (options?: Parameters<IdentityWorld['client']>[0]) => world.client(options);
  const sideOf = (c: { locks: LockClient }, name: string) => {
    const rw = c.locks.getReadWriteLock(name);
    return side === 'write' ? rw.writeLock() : rw.readLock();
  };
  /** Owner -> hold count of this side, as Redis has it. */
  const holders = (name: string) => {
    const keys = readWriteKeys(keyPrefix, name);
    return world.plain.hgetall(side === 'write' ? keys.write : keys.readCounts);
  };
  /** A rival owner is kept out: a writer always, a reader too while the lock is write-locked. */
  const rivalIsRefused = async (name: string) => {
    const rival = client().locks.getReadWriteLock(name);
    expect(await rival.writeLock().tryLock({ owner: 'rival' })).toBeNull();
    if (side === 'write') expect(await rival.readLock().tryLock({ owner: 'rival' })).toBeNull();
  };
  /** Bytes from Redis that carry a script's reply `word` (a release's, or the status of an attempt's), not a pub/sub message. */
  const reply = (word: string) => new RegExp(`^(?![\\s\\S]*message)[\\s\\S]*\\$${word.length}\\r\\n${word}\\r\\n`);

  it('a hold of an explicit owner taken by another process is counted, and its release leaves the first holder its hold (defect 3)', async () => {
    const a = client();
    const b = client();
    const name = 'shared-owner';
    const held = await sideOf(b, name).lock({ owner: 'job-8' });
    const again = await sideOf(a, name).lock({ owner: 'job-8' });
    expect(await holders(name)).toEqual({ 'job-8': '2' });
    expect(again.fencingToken).toBe(held.fencingToken);
    expect(await again.release()).toBe('decremented');
    expect(await holders(name)).toEqual({ 'job-8': '1' });
    await rivalIsRefused(name);
    expect(held.signal.aborted).toBe(false);
    expect(await held.release()).toBe('released');
    expect(await holders(name)).toEqual({});
    expect(await client().locks.getReadWriteLock(name).writeLock().tryLock({ owner: 'rival' })).not.toBeNull();
  });

  it('unlock({ owner }) of a hold taken elsewhere, re-sent after its reply was lost, releases one hold (defect 5)', async () => {
    const a = client({ viaProxy: true });
    const b = client();
    const name = 'unlock-by-owner';
    const outer = await sideOf(b, name).lock({ owner: 'job-5' });
    const inner = await sideOf(b, name).lock({ owner: 'job-5' });
    expect(await holders(name)).toEqual({ 'job-5': '2' });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(reply('decremented'));
    expect(await sideOf(a, name).unlock({ owner: 'job-5' })).toBe('decremented');
    expect(world.proxy.dropped).toBe(dropped + 1); // lost, and re-sent by ioredis
    expect(await holders(name)).toEqual({ 'job-5': '1' });
    await rivalIsRefused(name);
    // The holder's own releases: one hold was released for it already; the other frees the lock.
    expect(await inner.release()).toBe('decremented');
    expect(await outer.release()).toBe('released');
    expect(await holders(name)).toEqual({});
    expect(b.lost).toEqual([]);
  });

  it('unlock({ owner }) from another process ended one of two holds; once the holder releases the other, its last handle aborts (not-owner)', async () => {
    const a = client();
    const b = client();
    const name = 'unlock-by-owner-outer-first';
    const outer = await sideOf(b, name).lock({ owner: 'job-5' });
    const inner = await sideOf(b, name).lock({ owner: 'job-5' });
    expect(await sideOf(a, name).unlock({ owner: 'job-5' })).toBe('decremented');
    expect(await outer.release()).toBe('released');
    expect(await holders(name)).toEqual({});
    expect(inner.signal.aborted).toBe(true);
    expect(b.lost.map((e) => e.reason)).toEqual(['not-owner']);
    // Its holder's release finds nothing to release: told so, not 'released'.
    expect(await inner.release()).toBe('expired');
    expect(await client().locks.getReadWriteLock(name).writeLock().tryLock({ owner: 'rival' })).not.toBeNull();
  });

  it("a release re-sent by the application's client after its reply was lost reports what the first copy did (defect 10)", async () => {
    const a = client({ viaProxy: true });
    const name = 'resent-release';
    const handle = await sideOf(a, name).lock({ leaseTime: 30_000 });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(reply('released'));
    expect(await handle.release()).toBe('released');
    expect(world.proxy.dropped).toBe(dropped + 1);
    await sleep(100);
    expect(a.lost).toEqual([]);
    expect(await holders(name)).toEqual({});
  });

  it("an attempt re-sent by the application's client after its reply was lost takes one hold", async () => {
    const a = client({ viaProxy: true });
    const name = 'resent-attempt';
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(reply('granted'));
    const handle = await sideOf(a, name).lock({ owner: 'job-1', waitTime: 5_000 });
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(await holders(name)).toEqual({ 'job-1': '1' });
    await rivalIsRefused(name);
    expect(await handle.release()).toBe('released');
    expect(await holders(name)).toEqual({});
  });

  it("an attempt whose reply never came is claimed when it landed (the library's own connection, which re-sends nothing)", async () => {
    const locks = await createLockClient({
      connection: { type: 'single', host: '127.0.0.1', port: world.proxy.port },
      keyPrefix,
      logger: quietLogger,
      replicaSync: false,
    });
    world.track(locks);
    const name = 'claimed';
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(reply('granted'));
    const handle = await sideOf({ locks }, name).lock({ owner: 'job-2', waitTime: 10_000 });
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(await holders(name)).toEqual({ 'job-2': '1' });
    expect(handle.holdCount).toBe(1);
    expect(await handle.release()).toBe('released');
    expect(await holders(name)).toEqual({});
  });

  it('a release replayed after a connection drop never deletes the hold another process took since under the same owner (defect 2)', async () => {
    const a = client();
    const b = client();
    const name = 'replayed';
    const first = await sideOf(a, name).lock({ owner: 'job-7' });
    expect(await first.release()).toBe('released');
    const taken = await sideOf(b, name).lock({ owner: 'job-7' });
    // A's connection drops and comes back: it sends its recent releases again.
    await world.plain.client('KILL', 'ID', String(await a.locks.redis.client('ID')));
    await eventually(async () => a.locks.redis.status === 'ready', 5_000);
    await sleep(300);
    expect(await holders(name)).toEqual({ 'job-7': '1' });
    expect(taken.signal.aborted).toBe(false);
    await rivalIsRefused(name);
    expect(await taken.release()).toBe('released');
  });

  it('the release of a hold whose lease ran out never touches the hold its owner took again since', async () => {
    const a = client();
    const b = client();
    const name = 'ran-out';
    const old = await sideOf(a, name).lock({ owner: 'job-9', leaseTime: 200 });
    await eventually(() => old.signal.aborted, 5_000); // its lease ran out here…
    await eventually(async () => (await sideOf(b, name).getHoldCount('job-9')) === 0, 5_000); // …and in Redis
    const renewed = await sideOf(b, name).lock({ owner: 'job-9' });
    expect(await holders(name)).toEqual({ 'job-9': '1' });
    expect(await old.release()).toBe('expired');
    expect(await holders(name)).toEqual({ 'job-9': '1' });
    await rivalIsRefused(name);
    expect(renewed.signal.aborted).toBe(false);
    expect(await renewed.release()).toBe('released');
    expect(await holders(name)).toEqual({});
    expect(b.lost).toEqual([]);
  });
});

describe('identity by id: the read-write lock still excludes', () => {
  const keyPrefix = `rwex-${randomUUID().slice(0, 8)}`;
  let one: LockClient;
  let two: LockClient;

  beforeAll(() => {
    const { host, port } = sharedTopology('single').masters[0];
    one = new LockClient({ redis: new Redis({ host, port }), keyPrefix, logger: quietLogger });
    two = new LockClient({ redis: new Redis({ host, port }), keyPrefix, logger: quietLogger });
  });
  afterAll(async () => {
    for (const c of [one, two]) {
      await c.close();
      c.redis.disconnect();
    }
  });

  it('an explicit owner holding one side keeps every other owner out of the other side, from any process', async () => {
    const write = await one.getReadWriteLock('x').writeLock().lock({ owner: 'job:1' });
    for (const owner of ['job', 'job:', 'job:1:', '{job:1}']) {
      expect(await two.getReadWriteLock('x').readLock().tryLock({ owner })).toBeNull();
      expect(await two.getReadWriteLock('x').writeLock().tryLock({ owner })).toBeNull();
      await expect(two.getReadWriteLock('x').writeLock().unlock({ owner })).rejects.toMatchObject({
        name: 'LockNotHeldError',
      });
    }
    // The writer itself may read, from the other process too (a downgrade of its owner).
    const read = await two.getReadWriteLock('x').readLock().lock({ owner: 'job:1' });
    expect(await write.release()).toBe('released');
    expect(await one.getReadWriteLock('x').writeLock().tryLock({ owner: 'job:2' })).toBeNull();
    expect(await read.release()).toBe('released');
    const next = await one.getReadWriteLock('x').writeLock().tryLock({ owner: 'job:2' });
    expect(next).not.toBeNull();
    expect(await next!.release()).toBe('released');
  });
});
