import Redis from 'ioredis';
import {
  createLockClient,
  LockClient,
  LockUpgradeError,
  readWriteKeys,
  RedisPubSub,
  runInLockScope,
  type LockLostError,
} from '../../lib/internal';
import {
  CLAIM_ATTEMPT,
  READ_LOCK,
  READ_UNLOCK,
  WRITE_ABANDON,
  WRITE_LOCK,
  WRITE_UNLOCK,
} from '../../lib/engine/scripts/catalog';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import { eventually, lockClient, quietLogger, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/** Runs `fn` as another owner (a fresh lock scope), like a concurrent request would. */
const asOther = <T>(fn: () => Promise<T>): Promise<T> => runInLockScope(fn, { newScope: true });

/** Paths of the read-write lock the happy tests never take (review of the read-write lock). */
describe('ReadWriteLock under review', () => {
  const prefix = testPrefix();
  let client: TestClient;
  let name: string;

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix, watchdogTimeout: 900 });
  });
  beforeEach(() => (name = `rwr-${Math.random().toString(36).slice(2)}`));
  afterAll(() => client.close());

  const rwOf = (c: TestClient = client) => c.locks.getReadWriteLock(name);

  it('a write section opened inside a read section of the same lock is an upgrade: LockUpgradeError at once, no intent', async () => {
    const rw = rwOf();
    await rw.readLock().withLock(async () => {
      const started = Date.now();
      // A section of its own (nested in the reader's) would wait for its own caller's read hold.
      await expect(rw.writeLock().withLock(() => 'wrote', { waitTime: 4_000 })).rejects.toBeInstanceOf(
        LockUpgradeError,
      );
      expect(Date.now() - started).toBeLessThan(3_000); // refused, not waited out
      expect(await client.redis.exists(rw.keys.writers)).toBe(0); // no intent holds other readers back
      const otherRead = await asOther(() => rw.readLock().tryLock());
      expect(otherRead).not.toBeNull();
      await otherRead!.release();
    });
    expect(await rw.readLock().isLocked()).toBe(false);
  });

  it.each(['write', 'reentrant', 'fair'] as const)(
    'a %s hold whose inner release lengthened its lease past its fencing counter is still released by its holder',
    async (kind) => {
      // A short idle TTL stands for a lease longer than the default 10 minutes.
      const short = lockClient({ keyPrefix: prefix, idleKeyTtl: 100 });
      const lockOf = (c: TestClient) =>
        kind === 'write'
          ? c.locks.getReadWriteLock(name).writeLock()
          : kind === 'fair'
            ? c.locks.getFairLock(name)
            : c.locks.getLock(name);
      try {
        const lock = lockOf(short);
        await runInLockScope(async () => {
          const grantedBy = Date.now();
          const outer = await lock.lock({ leaseTime: 5_000 });
          const inner = await lock.lock({ leaseTime: 5_000 });
          await new Promise((resolve) => setTimeout(resolve, 4_000));
          // The release of the inner hold makes the lease 5 s again from now: longer than the outer hold
          // believes, and longer than the fencing counter (kept the lease + 100 ms from the grant) lives.
          expect(await inner.release()).toBe('decremented');
          await eventually(() => outer.signal.aborted, 10_000); // the holder takes its lease for over
          // Past the counter's first expiry (5.1 s after the grant), well before the lease's new end (9 s).
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, grantedBy + 5_400 - Date.now())));
          expect(await short.redis.exists(lock.keys.lock)).toBe(1); // Redis still has the hold…
          await outer.release(); // …which the holder's release of its lost hold must not leave behind
          expect(await short.redis.exists(lock.keys.lock)).toBe(0);
        });
        const next = await asOther(() => lockOf(client).tryLock());
        expect(next).not.toBeNull();
        await next!.release();
      } finally {
        await short.close();
      }
    },
    30_000,
  );

  it.each(['read', 'write'] as const)(
    "the %s side: another process's watched hold of the same explicit owner never shortens its longer explicit lease",
    async (side) => {
      const watcher = lockClient({ keyPrefix: prefix, watchdogTimeout: 900 });
      const rival = lockClient({ keyPrefix: prefix });
      try {
        const sideOf = (c: TestClient) => (side === 'read' ? rwOf(c).readLock() : rwOf(c).writeLock());
        const long = await sideOf(client).lock({ owner: 'job', leaseTime: 60_000 });
        const watched = await sideOf(watcher).lock({ owner: 'job' }); // renewed with 900 ms every 300 ms
        await new Promise((resolve) => setTimeout(resolve, 1_200));
        expect(await watched.release()).toBe('decremented');
        await new Promise((resolve) => setTimeout(resolve, 2_000)); // past the watched hold's lease
        expect(long.signal.aborted).toBe(false); // the holder believes it holds for a minute…
        // …so Redis must too: no other owner may write.
        expect(await rwOf(rival).writeLock().tryLock({ owner: 'rival' })).toBeNull();
        expect(await long.release()).toBe('released');
      } finally {
        await watcher.close();
        await rival.close();
      }
    },
    30_000,
  );

  it.each(['read', 'write'] as const)(
    'the %s side: extend(leaseTime) still sets the lease, shorter or not',
    async (side) => {
      const handle = await (side === 'read' ? rwOf().readLock() : rwOf().writeLock()).lock({ leaseTime: 60_000 });
      await handle.extend(2_000);
      const k = rwOf().keys;
      const [seconds, micros] = await client.redis.time();
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const left =
        side === 'read'
          ? Number(await client.redis.zscore(k.readers, handle.owner)) - now
          : await client.redis.pttl(k.write);
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThanOrEqual(2_000);
      expect(await handle.release()).toBe('released');
    },
  );

  it("close() while a writer waits withdraws the wait's intent: readers are not held back by a writer that is gone", async () => {
    const { host, port } = { host: '127.0.0.1', port: singlePort() };
    const closing = await createLockClient({
      connection: { type: 'single', host, port },
      keyPrefix: prefix,
      logger: quietLogger,
    });
    const rw = rwOf();
    const read = await asOther(() => rw.readLock().lock());
    const waiting = closing
      .getReadWriteLock(name, { writerIntentTimeout: 60_000 })
      .writeLock()
      .lock({ waitTime: 30_000 })
      .catch((error: unknown) => error);
    await eventually(async () => (await client.redis.zcard(rw.keys.writers)) === 1);
    await closing.close();
    expect(await waiting).toBeInstanceOf(Error);
    await eventually(async () => (await client.redis.exists(rw.keys.writers)) === 0, 5_000);
    const next = await asOther(() => rw.readLock().tryLock());
    expect(next).not.toBeNull();
    await next!.release();
    await read.release();
  }, 30_000);

  it('close() ends a wait on a connection the application keeps open: the closed client is granted nothing after', async () => {
    const passed = lockClient({ keyPrefix: prefix });
    try {
      const rw = rwOf();
      const read = await asOther(() => rw.readLock().lock());
      const waiting = rwOf(passed)
        .writeLock()
        .lock({ waitTime: 20_000 })
        .catch((error: unknown) => error);
      await eventually(async () => (await client.redis.zcard(rw.keys.writers)) === 1);
      await passed.locks.close(); // its connection stays open
      await read.release();
      expect(await waiting).toBeInstanceOf(Error);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await client.redis.exists(rw.keys.write, rw.keys.writers)).toBe(0);
    } finally {
      await passed.close();
    }
  }, 30_000);

  it.each(['read', 'write'] as const)(
    'the %s side: the hold ids outlive the holds an inner release leaves (a lease made longer by it)',
    async (side) => {
      const k = readWriteKeys(prefix, name);
      const redis = client.redis;
      const lease = 61_000; // past the minute ended records are kept, so the ids' TTL follows the lease
      const attempt = (holdId: string) =>
        side === 'read'
          ? READ_LOCK.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: lease, owner: 'job', holdId })
          : WRITE_LOCK.run(redis, k, {
              idleKeyTtl: IDLE_KEY_TTL,
              leaseMs: lease,
              owner: 'job',
              intentMs: 0,
              holdId,
              waitId: 'w',
            });
      const release = side === 'read' ? READ_UNLOCK : WRITE_UNLOCK;
      await attempt('outer');
      await attempt('inner');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      // The inner hold's release makes the lease `lease` again from now…
      const args = { owner: 'job', holdId: 'inner', leaseMs: lease, publish: 'publish', which: 'one' } as const;
      expect(await release.run(redis, k, args)).toBe('decremented');
      const [seconds, micros] = await redis.time();
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const holdLeft = side === 'read' ? Number(await redis.zscore(k.readers, 'job')) - now : await redis.pttl(k.write);
      expect(holdLeft).toBeGreaterThan(lease - 1_000);
      // …and the outer hold's record must last as long: without it, its release finds no hold ('not-owner')
      // and leaves it in Redis, with no holder, for the rest of that lease.
      const grants = side === 'read' ? k.readGrants : k.writeGrants;
      expect(await redis.pttl(grants)).toBeGreaterThanOrEqual(holdLeft - 50);
      const last = { ...args, holdId: 'outer' };
      expect(await release.run(redis, k, last)).toBe('released');
    },
    30_000,
  );
  it.each(['claimed', 'taken back'] as const)(
    'a copy of a refused write attempt whose reply was lost, %s before its wait was abandoned, comes late and registers no intent',
    async (settled) => {
      const k = readWriteKeys(prefix, name);
      const redis = client.redis;
      const [leaseMs, idleKeyTtl, publish] = [30_000, IDLE_KEY_TTL, 'publish'] as const;
      await READ_LOCK.run(redis, k, { idleKeyTtl, leaseMs, owner: 'reader', holdId: 'r1' });
      const attempt = () =>
        WRITE_LOCK.run(redis, k, { idleKeyTtl, leaseMs, owner: 'writer', intentMs: 30_000, holdId: 'h1', waitId: 'w' });
      expect((await attempt())[0]).toBe('refused'); // its reply is lost
      // The engine settles an attempt whose reply never came by its id before the wait's abandon is sent:
      // asked about before the next attempt, or taken back when the caller gives up (see LockAcquisition).
      if (settled === 'claimed') {
        const keys = { lock: k.write, grants: k.writeGrants, fence: k.fence };
        expect(
          await CLAIM_ATTEMPT.run(redis, keys, { holdId: 'h1', owner: 'writer', leaseMs, idleKeyTtl: 60_000 }),
        ).toEqual(['cancelled']);
      } else {
        const undo = { owner: 'writer', holdId: 'h1', leaseMs, publish, which: 'one' } as const;
        expect(await WRITE_UNLOCK.run(redis, k, undo)).toBe('not-locked');
      }
      expect(await WRITE_ABANDON.run(redis, k, { owner: 'writer', publish, waitId: 'w' })).toBe(true);
      // The copy (sent again by ioredis after a reconnect) comes after all that: it takes and registers nothing.
      expect((await attempt())[0]).toBe('refused');
      expect(await redis.exists(k.writers)).toBe(0);
      const release = { owner: 'reader', holdId: 'r1', leaseMs, publish, which: 'one' } as const;
      expect(await READ_UNLOCK.run(redis, k, release)).toBe('released');
    },
  );
});

/**
 * The read side, with a reply lost: the client reaches Redis through a proxy that can lose a reply, and
 * hears its messages through another, which the test can hold back.
 */
describe('ReadWriteLock under review: read attempts whose reply was lost', () => {
  let commands: ReplyDroppingProxy;
  let messages: ReplyDroppingProxy;
  let locks: LockClient;
  let plain: Redis;
  const keyPrefix = testPrefix();
  const lost: LockLostError[] = [];

  beforeAll(async () => {
    const upstream = sharedTopology('single').masters[0];
    commands = await ReplyDroppingProxy.start(upstream);
    messages = await ReplyDroppingProxy.start(upstream);
    // As the library's own connections are made: nothing is sent again behind the engine's back.
    const redis = new Redis({
      host: '127.0.0.1',
      port: commands.port,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      lazyConnect: true,
    });
    const subscriber = new Redis({ host: '127.0.0.1', port: messages.port, maxRetriesPerRequest: null });
    const pubsub = new RedisPubSub(subscriber, false, true);
    locks = new LockClient({
      redis,
      pubsub,
      keyPrefix,
      logger: quietLogger,
      replicaSync: false,
      operationTimeout: 1_500,
    });
    locks.on('lockLost', (error: LockLostError) => lost.push(error));
    plain = new Redis(upstream);
    await redis.connect();
  });
  afterAll(async () => {
    messages.cutOff(false);
    await locks.close();
    locks.redis.disconnect();
    plain.disconnect();
    await Promise.all([commands.close(), messages.close()]);
  });

  it('an attempt claimed after a re-entry of its owner in the same process is a hold of the same read lock, not a loss', async () => {
    const rw = locks.getReadWriteLock('claimed-late');
    const k = rw.keys;
    // Waits on the read channel are not confirmed while the messages are held: the first call, its reply
    // lost, asks about its attempt only once that wait for the subscription gives up (operationTimeout).
    messages.cutOff(true);
    commands.dropNextReply(/granted/);
    const first = rw.readLock().lock({ owner: 'job', waitTime: 10_000 });
    first.catch(() => undefined);
    await eventually(() => commands.dropped === 1);
    expect(await plain.hget(k.readCounts, 'job')).toBe('1'); // the attempt landed
    await eventually(() => locks.redis.status === 'ready');
    // The second call of the owner re-enters the hold the first one took, before the first claims it.
    const second = await rw.readLock().lock({ owner: 'job', waitTime: 10_000 });
    expect(await plain.hget(k.readCounts, 'job')).toBe('2');
    messages.cutOff(false);
    const claimed = await first;
    await sleep(100);
    // Both holds are Redis's: neither holder may be told it lost the lock.
    expect({ first: claimed.signal.aborted, second: second.signal.aborted, lost: lost.length }).toEqual({
      first: false,
      second: false,
      lost: 0,
    });
    expect(await claimed.release()).toBe('decremented');
    expect(await second.release()).toBe('released');
    expect(await plain.exists(k.readers, k.readCounts)).toBe(0);
  }, 30_000);

  it('an attempt claimed after the hold of an earlier re-entry was forced away is a new hold: the earlier one is lost', async () => {
    const rw = locks.getReadWriteLock('forced-before');
    const k = rw.keys;
    const elsewhere = new LockClient({ redis: plain, keyPrefix, logger: quietLogger });
    try {
      // Another process's hold of the owner: this client's first hold of it is a re-entry.
      await elsewhere.getReadWriteLock('forced-before').readLock().lock({ owner: 'job' });
      const earlier = await rw.readLock().lock({ owner: 'job' });
      expect(await plain.hget(k.readCounts, 'job')).toBe('2');
      expect(await elsewhere.getReadWriteLock('forced-before').readLock().forceUnlock()).toBe(true);
      commands.dropNextReply(/granted/);
      const before = lost.length;
      const later = await rw.readLock().lock({ owner: 'job', waitTime: 10_000 });
      expect(commands.dropped).toBe(2);
      // The attempt landed on nothing of the owner's: the earlier hold was gone, and its holder is told.
      expect(await plain.hget(k.readCounts, 'job')).toBe('1');
      expect(earlier.signal.aborted).toBe(true);
      expect(lost.length).toBe(before + 1);
      expect(later.signal.aborted).toBe(false);
      expect(await later.release()).toBe('released');
      expect(await plain.exists(k.readers, k.readCounts)).toBe(0);
    } finally {
      await elsewhere.close();
    }
  }, 30_000);
});
