import Redis from 'ioredis';
import {
  createLockClient,
  LockClient,
  LockLostError,
  LockOptionsError,
  LockUpgradeError,
  READ_WRITE_LOCK_DEFAULTS,
  runInLockScope,
  type ConnectionOptions,
} from '../../lib/internal';
import { eventually, lockClient, quietLogger, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';
import { runScriptUnchecked } from '../../lib/engine/scripts/loader';
import { inspectReadWriteLock } from '../../lib/engine/client/kind-inspections';
import { sharedTopology } from '../support/topologies';
import { killAll, startWorker, type Worker } from '../support/workers';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';

/** Runs `fn` as another owner (a fresh lock scope), like a concurrent request would. */
const asOther = <T>(fn: () => Promise<T>): Promise<T> => runInLockScope(fn, { newScope: true });

describe('ReadWriteLock', () => {
  const prefix = testPrefix();
  let client: TestClient;
  let other: TestClient;
  let name: string;
  const workers: Worker[] = [];

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix, watchdogTimeout: 900 });
    other = lockClient({ keyPrefix: prefix, watchdogTimeout: 900 });
  });
  beforeEach(() => (name = `rw-${Math.random().toString(36).slice(2)}`));
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    await client.close();
    await other.close();
  });

  const rwOf = (c: TestClient = client) => c.locks.getReadWriteLock(name);

  it('readers share the lock; a writer excludes readers and other writers', async () => {
    const rw = rwOf();
    const first = await asOther(() => rw.readLock().lock());
    const second = await asOther(() => rwOf(other).readLock().lock());
    expect(await rw.readLock().isLocked()).toBe(true);
    expect(await asOther(() => rw.writeLock().tryLock())).toBeNull();
    expect(await first.release()).toBe('released');
    expect(await asOther(() => rw.writeLock().tryLock())).toBeNull(); // one reader is enough to keep it out
    expect(await second.release()).toBe('released');
    expect(await rw.readLock().isLocked()).toBe(false);

    const writer = await asOther(() => rw.writeLock().lock());
    expect(await rw.writeLock().isLocked()).toBe(true);
    expect(await asOther(() => rw.readLock().tryLock())).toBeNull();
    expect(await asOther(() => rwOf(other).writeLock().tryLock())).toBeNull();
    expect(await writer.release()).toBe('released');
    // Nothing is left behind: every key but the fencing counter is gone.
    expect(await client.redis.exists(rw.keys.write, rw.keys.readers, rw.keys.readCounts, rw.keys.writers)).toBe(0);
    // The holds' ids stay a while, to answer a release sent again: every one of them ended.
    for (const grants of [rw.keys.readGrants, rw.keys.writeGrants]) {
      expect(Object.values(await client.redis.hgetall(grants))).toEqual(expect.arrayContaining(['r']));
      expect(Object.values(await client.redis.hgetall(grants)).filter((v) => !'rdox'.includes(v))).toEqual([]);
    }
  });

  it('both sides are re-entrant within one owner scope', async () => {
    const rw = rwOf();
    await runInLockScope(async () => {
      const outer = await rw.readLock().lock();
      const inner = await rw.readLock().lock();
      expect(inner.holdCount).toBe(2);
      expect(await rw.readLock().getHoldCount()).toBe(2);
      expect(await inner.release()).toBe('decremented');
      expect(await outer.release()).toBe('released');

      const w1 = await rw.writeLock().lock();
      const w2 = await rw.writeLock().lock();
      expect(w2.fencingToken).toBe(w1.fencingToken);
      expect(await rw.writeLock().getHoldCount()).toBe(2);
      expect(await asOther(() => rw.writeLock().tryLock())).toBeNull();
      expect(await w2.release()).toBe('decremented');
      expect(await rw.writeLock().isLocked()).toBe(true);
      expect(await w1.release()).toBe('released');
    });
  });

  it('the writer may read, and keeps reading after its write release (downgrade)', async () => {
    const rw = rwOf();
    await runInLockScope(async () => {
      const write = await rw.writeLock().lock();
      const read = await rw.readLock().lock();
      expect(await asOther(() => rw.readLock().tryLock())).toBeNull(); // still write-locked for others
      expect(await rw.writeLock().tryLock()).not.toBeNull(); // re-entry although it reads too
      await rw.writeLock().unlock();
      expect(await write.release()).toBe('released');

      // Only a reader now: others may read, no one may write.
      const otherRead = await asOther(() => rw.readLock().tryLock());
      expect(otherRead).not.toBeNull();
      expect(await asOther(() => rw.writeLock().tryLock())).toBeNull();
      await otherRead!.release();
      expect(await read.release()).toBe('released');
    });
    expect(await asOther(() => rw.writeLock().tryLock())).not.toBeNull();
  });

  it('a reader cannot upgrade: LockUpgradeError at once, no intent left, other readers unaffected', async () => {
    const rw = rwOf();
    await rw.readLock().withLock(async () => {
      const started = Date.now();
      await expect(rw.writeLock().lock()).rejects.toBeInstanceOf(LockUpgradeError);
      await expect(rw.writeLock().tryLock({ waitTime: 5_000 })).rejects.toMatchObject({
        name: 'LockUpgradeError',
        key: name,
      });
      expect(Date.now() - started).toBeLessThan(3_000); // refused, not waited out
      expect(await client.redis.exists(rw.keys.writers)).toBe(0);
      const otherRead = await asOther(() => rw.readLock().tryLock());
      expect(otherRead).not.toBeNull();
      await otherRead!.release();
    });
    expect(await rw.readLock().isLocked()).toBe(false);
  });

  it('fencing tokens grow with each write grant; a read carries the last write token', async () => {
    const rw = rwOf();
    const tokens: number[] = [];
    for (let i = 0; i < 3; i++) {
      await asOther(() => rw.writeLock().withLock(({ fencingToken }) => void tokens.push(fencingToken)));
      await asOther(() =>
        rwOf(other)
          .readLock()
          .withLock(() => undefined),
      ); // reads do not take tokens
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0]);
    expect(tokens[2]).toBeGreaterThan(tokens[1]);
    const read = await asOther(() => rw.readLock().lock());
    expect(read.fencingToken).toBe(tokens[2]);
    await read.release();
  });

  it('releasing wakes waiters by pub/sub: every waiting reader of a process, and a waiting writer', async () => {
    const rw = rwOf();
    // A long explicit lease: the readers cannot be retrying on its expiry, only on the release's message.
    const writer = await asOther(() => rwOf(other).writeLock().lock({ leaseTime: 60_000 }));
    const readers = [0, 1, 2].map(() => asOther(() => rw.readLock().lock({ waitTime: 30_000 })));
    await sleep(300);
    let releasedAt = Date.now();
    await writer.release();
    const held = await Promise.all(readers); // all three at once: readers share
    expect(Date.now() - releasedAt).toBeLessThan(1_500);
    expect(await client.redis.zcard(rw.keys.readers)).toBe(3);

    const waitingWriter = asOther(() => rwOf(other).writeLock().lock({ waitTime: 30_000 }));
    await eventually(async () => (await client.redis.zcard(rw.keys.writers)) === 1);
    await held[0].release();
    await held[1].release();
    await sleep(200);
    releasedAt = Date.now();
    await held[2].release();
    const write = await waitingWriter;
    expect(Date.now() - releasedAt).toBeLessThan(1_500);
    await write.release();
  });

  it('a crashed reader expires on its own lease while another reader keeps renewing', async () => {
    const rw = rwOf();
    const lease = 1_500;
    const crashed = startWorker('hold-lock.ts', {
      REDIS_PORT: singlePort(),
      KEY_PREFIX: prefix,
      LOCK_KIND: 'read',
      LOCK_NAME: name,
      WATCHDOG_MS: lease,
    });
    workers.push(crashed);
    await crashed.waitFor('acquired');
    const alive = await asOther(() => rw.readLock().lock()); // watched, renewed every 300 ms
    expect(await client.redis.zcard(rw.keys.readers)).toBe(2);
    await sleep(lease); // the worker's watchdog renewed its hold meanwhile
    expect(await client.redis.zcard(rw.keys.readers)).toBe(2);

    crashed.child.kill('SIGKILL');
    const killedAt = Date.now();
    const writer = asOther(() => rwOf(other).writeLock().lock({ waitTime: 30_000 }));
    // The dead reader's hold runs out within its lease; ours lives on, renewed, keeping the keys alive.
    await eventually(async () => {
      const live = await client.redis.zrangebyscore(rw.keys.readers, `(${await serverMs(client.redis)}`, '+inf');
      return live.length === 1 && live[0] === alive.owner;
    }, 10_000);
    expect(Date.now() - killedAt).toBeLessThanOrEqual(lease + 2_000);
    await sleep(2_000); // several of our renewals, well past the dead one's lease
    expect(alive.isLost).toBe(false);
    expect(await client.redis.pttl(rw.keys.readers)).toBeGreaterThan(0);
    expect(await rw.readLock().isLocked()).toBe(true);

    await alive.release(); // the last live reader: the writer gets in now
    const write = await writer;
    expect(write.fencingToken).toBeGreaterThan(0);
    await write.release();
  }, 40_000);

  it('the watchdog renews read and write holds past several leases', async () => {
    const rw = rwOf();
    const reads = await Promise.all([0, 1].map(() => asOther(() => rw.readLock().lock())));
    const write = await asOther(() => client.locks.getReadWriteLock(`${name}-w`).writeLock().lock());
    await sleep(3 * 900 + 300);
    for (const handle of [...reads, write]) expect(handle.isLost).toBe(false);
    expect(await rw.readLock().remainTimeToLive()).toBeGreaterThan(0);
    expect(await client.locks.getReadWriteLock(`${name}-w`).writeLock().remainTimeToLive()).toBeGreaterThan(0);
    expect(await Promise.all([...reads, write].map((h) => h.release()))).toEqual(['released', 'released', 'released']);
  });

  it('a lost read hold aborts its signal: an explicit lease running out, or a forced unlock', async () => {
    const rw = rwOf();
    const leased = await asOther(() => rw.readLock().lock({ leaseTime: 300 }));
    const watched = await asOther(() => rw.readLock().lock());
    await eventually(() => leased.signal.aborted, 5_000);
    expect(leased.signal.reason).toBeInstanceOf(LockLostError);
    // The signal aborts a drift margin (1 % + 2 ms) before Redis lets the lease go; then it is gone there too.
    await sleep(50);
    expect(await leased.release()).toBe('expired');
    expect(watched.isLost).toBe(false);

    expect(await rw.readLock().forceUnlock()).toBe(true);
    await eventually(() => watched.signal.aborted, 5_000); // the next renewal finds it gone
    expect(watched.signal.reason).toBeInstanceOf(LockLostError);
  });

  it('a waiting writer is not starved by a continuous stream of readers', async () => {
    const rw = rwOf();
    let stop = false;
    let readsDuringWriterWait = 0;
    let writerWaiting = false;
    let waited = Infinity;
    // Four readers in a row, each holding 200 ms and coming straight back: the lock is never free of readers.
    const stream = [0, 1, 2, 3].map(async (i) => {
      await sleep(i * 50);
      while (!stop) {
        await asOther(() =>
          rw.readLock().withLock(async () => {
            if (writerWaiting) readsDuringWriterWait++;
            await sleep(200);
          }),
        );
      }
    });
    try {
      // The stream is running: a reader is inside (waited for, not sampled once: on a loaded machine the
      // four can all be between two holds at one instant).
      await sleep(1_000);
      await eventually(async () => (await client.redis.zcard(rw.keys.readers)) > 0, 10_000);
      const asked = Date.now();
      writerWaiting = true;
      const write = await asOther(() => rwOf(other).writeLock().lock({ waitTime: 15_000 }));
      writerWaiting = false;
      waited = Date.now() - asked;
      expect(await client.redis.zcard(rw.keys.readers)).toBe(0); // the stream paused behind the writer
      await write.release();
      await sleep(500);
    } finally {
      // Stopped however the test ends: a stream left running would outlive the client.
      stop = true;
      await Promise.allSettled(stream);
    }
    // It waited for the readers in their critical sections (at most one round of them), not for a gap.
    expect(waited).toBeLessThan(5_000);
    expect(readsDuringWriterWait).toBeLessThanOrEqual(4);
  }, 40_000);

  it('a writer that gives up withdraws its intent; a dead writer’s intent lapses on its own', async () => {
    const rw = client.locks.getReadWriteLock(name, { writerIntentTimeout: 1_000 });
    const read = await asOther(() => rw.readLock().lock());
    expect(await asOther(() => rw.writeLock().tryLock({ waitTime: 300 }))).toBeNull();
    expect(await client.redis.exists(rw.keys.writers)).toBe(0);
    const newReader = await asOther(() => rw.readLock().tryLock());
    expect(newReader).not.toBeNull();
    await newReader!.release();

    // A writer whose process died while waiting: its intent holds new readers back until its deadline.
    await client.redis.zadd(rw.keys.writers, (await serverMs(client.redis)) + 1_000, 'dead-client:scope');
    expect(await asOther(() => rw.readLock().tryLock())).toBeNull();
    const started = Date.now();
    const late = await asOther(() => rw.readLock().lock({ waitTime: 10_000 }));
    expect(Date.now() - started).toBeLessThan(5_000);
    await late.release();
    await read.release();
  });

  it('a write wait that gives up withdraws its own intent only: another wait of its owner still holds readers back', async () => {
    // Intents refreshed every 10 s: the waiting writer's intent stands only if nothing took it.
    const rw = client.locks.getReadWriteLock(name, { writerIntentTimeout: 30_000 });
    const read = await asOther(() => rw.readLock().lock());
    const patient = rw.writeLock().lock({ owner: 'writer', waitTime: 20_000 });
    await eventually(async () => (await client.redis.zcard(rw.keys.writers)) === 1);
    expect(await rw.writeLock().tryLock({ owner: 'writer', waitTime: 300 })).toBeNull();
    expect(await client.redis.zcard(rw.keys.writers)).toBe(1);
    const seen = await inspectReadWriteLock(client.redis, name, rw.keys, 10);
    expect(seen.waitingWriters.map((w) => w.owner)).toEqual(['writer']);
    expect(await asOther(() => rw.readLock().tryLock())).toBeNull();
    await read.release();
    await (await patient).release();
    expect(await client.redis.exists(rw.keys.writers)).toBe(0);
  });

  it('unlock by scope, and outcomes of releases that find nothing', async () => {
    const rw = rwOf();
    await runInLockScope(async () => {
      await rw.readLock().lock();
      expect(await rw.readLock().unlock()).toBe('released');
      await expect(rw.readLock().unlock()).rejects.toMatchObject({ name: 'LockNotHeldError' });
      await expect(rw.writeLock().unlock()).rejects.toMatchObject({ name: 'LockNotHeldError' });
    });
  });

  it('renew-many-n renews a live read hold (three keys) next to a hash lock, never an expired one', async () => {
    const rw = rwOf();
    const { readers, readCounts, readGrants } = rw.keys;
    const hash = client.locks.getLock(`${name}-plain`);
    const plain = await hash.lock({ leaseTime: 1_000 });
    const read = await rw.readLock().lock({ leaseTime: 1_000 });
    const renew = (keys: string[], args: (string | number)[]) =>
      runScriptUnchecked(client.redis, 'renew-many-n.lua', keys, args);
    const readKeys = [readers, readCounts, readGrants, rw.keys.fence];
    const both = [hash.keys.lock, hash.keys.fence, ...readKeys];
    await client.redis.pexpire(readGrants, 1_000);
    expect(await renew(both, [IDLE_KEY_TTL, 'hash', 90_000, plain.owner, 'read', 90_000, read.owner])).toEqual([1, 1]);
    const score = Number(await client.redis.zscore(readers, read.owner));
    expect(score - (await serverMs(client.redis))).toBeGreaterThan(80_000);
    expect(await client.redis.pttl(readCounts)).toBeGreaterThan(80_000);
    expect(await client.redis.pttl(readGrants)).toBeGreaterThan(80_000); // the hold's id lives as long
    expect(await renew(readKeys, [IDLE_KEY_TTL, 'read', 30_000, 'someone-else'])).toEqual([0]);

    // A hold whose own expiry has passed stays expired, even while its keys live on for another reader.
    await client.redis.zadd(readers, (await serverMs(client.redis)) - 1, read.owner);
    await client.redis.zadd(readers, (await serverMs(client.redis)) + 30_000, 'living-reader');
    expect(await renew(readKeys, [IDLE_KEY_TTL, 'read', 30_000, read.owner])).toEqual([0]);
    expect(Number(await client.redis.zscore(readers, read.owner))).toBeLessThan(await serverMs(client.redis));

    // Key counts must match the kinds: refused before any renewal.
    await expect(
      renew(
        [hash.keys.lock, hash.keys.fence, readers, readCounts],
        [IDLE_KEY_TTL, 'hash', 1_000, plain.owner, 'read', 1_000, 'x'],
      ),
    ).rejects.toThrow(/BADARG expected 6 keys/);
    await expect(renew(readKeys, [IDLE_KEY_TTL, 'rw', 1_000, 'x'])).rejects.toThrow(/BADARG kind/);
    await plain.release();
    await client.redis.del(readers, readCounts, readGrants);
  });

  it('each read-write script called with malformed arguments writes nothing', async () => {
    const { write, readers, readCounts, writers, fence, readChannel, writeChannel, forced, writeGrants, readGrants } =
      rwOf().keys;
    const readLock = [write, readers, readCounts, writers, fence, readGrants];
    const writeLock = [write, readers, readCounts, writers, fence, writeGrants, readGrants];
    const readUnlock = [write, readers, readCounts, writeChannel, readGrants];
    const writeUnlock = [write, readers, readChannel, writeChannel, writeGrants, fence];
    const force = [write, readers, readCounts, readChannel, writeChannel, forced, writeGrants, readGrants];
    const calls: [string, string[], (string | number)[]][] = [
      ['rw-read-lock-6.lua', readLock, ['1500.5', 'owner', 'h', IDLE_KEY_TTL]],
      ['rw-read-lock-6.lua', readLock, [1_000, '', 'h', IDLE_KEY_TTL]],
      ['rw-read-lock-6.lua', readLock, [1_000, 'owner', '', IDLE_KEY_TTL]],
      ['rw-read-lock-6.lua', readLock, [1_000, 'owner']],
      ['rw-write-lock-7.lua', writeLock, [0, 'owner', 5_000, 'h', IDLE_KEY_TTL, 'w']],
      ['rw-write-lock-7.lua', writeLock, [1_000, 'owner', -1, 'h', IDLE_KEY_TTL, 'w']],
      ['rw-write-lock-7.lua', writeLock, [1_000, '', 0, 'h', IDLE_KEY_TTL, 'w']],
      ['rw-write-lock-7.lua', writeLock, [1_000, 'own\0er', 5_000, 'h', IDLE_KEY_TTL, 'w']],
      ['rw-write-lock-7.lua', writeLock, [1_000, 'owner', 0, '', IDLE_KEY_TTL, 'w']],
      ['rw-write-lock-7.lua', writeLock, [1_000, 'owner', 5_000, 'h', IDLE_KEY_TTL]],
      ['rw-read-unlock-5.lua', readUnlock, ['owner', 'h', 1_000, 'publish', 'all']],
      ['rw-read-unlock-5.lua', readUnlock, ['owner', 'h', 1_000, 'del', 'one']],
      ['rw-read-unlock-5.lua', readUnlock, ['owner', '', 1_000, 'publish', 'one']],
      ['rw-read-unlock-5.lua', readUnlock, ['owner', 'h', '1.5', 'publish', 'one']],
      ['rw-write-unlock-6.lua', writeUnlock, ['owner', 'h', 'abc', 'publish', 'one']],
      ['rw-write-unlock-6.lua', writeUnlock, ['', 'h', 1_000, 'publish', 'one']],
      ['rw-write-unlock-6.lua', writeUnlock, ['owner', '', 1_000, 'publish', 'any']],
      ['rw-write-unlock-6.lua', writeUnlock, ['owner', 'h', 1_000, 'publish', '']],
      ['rw-read-claim-3.lua', [readers, readCounts, readGrants], ['', 'owner']],
      ['rw-read-claim-3.lua', [readers, readCounts, readGrants], ['h', '']],
      ['rw-write-abandon-3.lua', [write, writers, readChannel], ['owner', 'flushall', 'w']],
      ['rw-write-abandon-3.lua', [write, writers, readChannel], ['', 'publish', 'w']],
      ['rw-write-abandon-3.lua', [write, writers, readChannel], ['owner', 'publish', '']],
      ['rw-force-unlock-8.lua', force, ['both', 'publish', 'id']],
      ['rw-force-unlock-8.lua', force, ['write', 'publish', '']],
    ];
    for (const [script, keys, args] of calls) {
      await expect(runScriptUnchecked(client.redis, script, keys, args)).rejects.toThrow(/BADARG/);
    }
    expect(await client.redis.exists(write, readers, readCounts, writers, fence, forced, writeGrants, readGrants)).toBe(
      0,
    );
  });

  it('bad input raises LockOptionsError before any Redis call', async () => {
    expect(READ_WRITE_LOCK_DEFAULTS).toEqual({ writerIntentTimeout: 5_000 });
    // A client whose every Redis call would fail: only validation can answer.
    const redis = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    const offline = new LockClient({ redis, logger: quietLogger, telemetry: false, replicaSync: false });
    try {
      expect(() => offline.getReadWriteLock('')).toThrow(LockOptionsError);
      expect(() => offline.getReadWriteLock('x'.repeat(2_000))).toThrow(LockOptionsError);
      expect(() => offline.getReadWriteLock('x', { writerIntentTimeout: -1 })).toThrow(
        expect.objectContaining({ option: 'writerIntentTimeout', value: -1 }),
      );
      expect(() => offline.getReadWriteLock('x', { writerIntentTimeout: NaN })).toThrow(LockOptionsError);
      const rw = offline.getReadWriteLock('x');
      const cases: [Promise<unknown>, string][] = [
        [rw.readLock().lock({ leaseTime: -1 }), 'leaseTime'],
        [rw.readLock().tryLock({ waitTime: Infinity }), 'waitTime'],
        [rw.writeLock().lock({ leaseTime: 'soon' as unknown as number }), 'leaseTime'],
        [rw.writeLock().tryLock({ owner: '' }), 'owner'],
        [rw.writeLock().withLock(() => undefined, { waitTime: -3 }), 'waitTime'],
      ];
      for (const [call, option] of cases) {
        await expect(call).rejects.toMatchObject({ name: 'LockOptionsError', key: 'x', option });
      }
      expect(redis.status).toBe('wait'); // never connected
    } finally {
      await offline.close();
      redis.disconnect();
    }
  });
});

/** Redis server time in ms (the clock the scripts use). */
async function serverMs(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** What test/workers/rw-racer.ts reports. */
interface RacerResult {
  reads: number;
  writes: number;
  violations: string[];
  maxReaders: number;
}

describe.each(['single', 'cluster'] as const)('ReadWriteLock across 8 processes on %s', (deployment) => {
  const prefix = testPrefix();
  const workers: Worker[] = [];
  let locks: LockClient;

  const connection = (): ConnectionOptions => {
    const topology = sharedTopology(deployment);
    return deployment === 'cluster'
      ? { type: 'cluster', nodes: topology.masters }
      : { type: 'single', host: topology.masters[0].host, port: topology.masters[0].port };
  };

  beforeAll(async () => (locks = await createLockClient({ connection: connection(), keyPrefix: prefix })));
  afterEach(() => killAll(workers.splice(0)));
  afterAll(() => locks.close());

  it('never a writer with anyone else, readers really overlap, no lost update, tokens only grow', async () => {
    const env = {
      CONNECTION: JSON.stringify(connection()),
      KEY_PREFIX: prefix,
      LOCK_NAME: 'hot',
      WRITE_RATIO: 0.3,
      CONCURRENCY: 2,
      READERS_KEY: `${prefix}:readers-now`,
      WRITERS_KEY: `${prefix}:writers-now`,
      COUNTER_KEY: `${prefix}:counter`,
      TOKENS_KEY: `${prefix}:tokens`,
      DURATION_MS: 4_000,
      OPERATION_TIMEOUT_MS: 10_000, // 8 processes connecting at once on 2 busy cores: be patient
    };
    const procs = Array.from({ length: 8 }, () => startWorker('rw-racer.ts', env));
    workers.push(...procs);
    // Started together once all are connected (starting 8 processes on 2 busy cores takes a while).
    await Promise.all(procs.map((w) => w.waitFor('ready', 60_000)));
    procs.forEach((w) => w.send('go'));
    const results = (await Promise.all(procs.map((w) => w.result))) as RacerResult[];

    expect(results.flatMap((r) => r.violations)).toEqual([]);
    const writes = results.reduce((sum, r) => sum + r.writes, 0);
    const reads = results.reduce((sum, r) => sum + r.reads, 0);
    expect(writes).toBeGreaterThan(0);
    expect(reads).toBeGreaterThan(0);
    expect(Math.max(...results.map((r) => r.maxReaders))).toBeGreaterThan(1);
    expect(Number(await locks.redis.get(env.COUNTER_KEY))).toBe(writes);
    const tokens = (await locks.redis.lrange(env.TOKENS_KEY, 0, -1)).map(Number);
    expect(tokens).toHaveLength(writes);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
    // Both counters are back at zero, and the lock left nothing behind but its fencing counter.
    expect(await locks.redis.get(env.READERS_KEY)).toBe('0');
    expect(await locks.redis.get(env.WRITERS_KEY)).toBe('0');
    const rw = locks.getReadWriteLock('hot');
    expect(await locks.redis.exists(rw.keys.write)).toBe(0);
    expect(await locks.redis.exists(rw.keys.readers)).toBe(0);
    expect(await locks.redis.exists(rw.keys.writers)).toBe(0);
  }, 120_000);
});
