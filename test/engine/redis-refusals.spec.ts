import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import {
  connectRedLockMasters,
  createLockClient,
  RedisRefusedError,
  RedisUnavailableError,
  LockClient,
  type LockHandle,
} from '../../lib';
import { portShift, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { eventually, recordingLogger, sleep } from '../support/engine';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/** A private single server (see scripts/redis-topology.ts): its memory limit and users are changed here. */
const BASE_PORT = PRIVATE_PORTS.redisRefusals.base;
const PORT = BASE_PORT + portShift();

/**
 * When Redis answers but refuses: full memory (OOM), a user without permission (NOPERM), a script
 * running past busy-reply-threshold (BUSY). A refused acquisition fails at once with a typed error
 * and writes nothing; what frees memory (releases, renewals, hand-offs) still runs on a full Redis.
 * And a Redis that may evict locks (a memory limit with an eviction policy) is warned about.
 */
describe('Redis refusals', () => {
  let topology: RunningTopology;
  let admin: Redis;
  const open: LockClient[] = [];
  const logger = recordingLogger();
  const warnings = logger.messages;

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: BASE_PORT, name: 'refusals' });
    admin = new Redis({ port: PORT, maxRetriesPerRequest: 1 });
  }, 60_000);
  afterEach(async () => {
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await Promise.all(open.splice(0).map((c) => c.close()));
    await admin.flushall();
    warnings.length = 0;
  });
  afterAll(async () => {
    admin?.disconnect();
    if (topology) await stopTopology(topology);
  });

  const client = async (
    options: { username?: string; watchdogTimeout?: number; keyPrefix?: string } = {},
  ): Promise<LockClient> => {
    const locks = await createLockClient({
      connection: {
        type: 'single',
        host: '127.0.0.1',
        port: PORT,
        ...(options.username ? { redisOptions: { username: options.username, password: 'x' } } : {}),
      },
      keyPrefix: options.keyPrefix ?? `rf-${randomUUID().slice(0, 8)}`,
      watchdogTimeout: options.watchdogTimeout,
      logger,
    });
    open.push(locks);
    return locks;
  };

  /**
   * Puts the server over its memory limit (1 MB of data, then a limit 256 KB under what it uses): with
   * noeviction it refuses, from here on, whatever needs more memory.
   */
  async function fillMemory(): Promise<void> {
    const chunk = 'x'.repeat(16_384);
    await Promise.all(Array.from({ length: 64 }, (_, i) => admin.set(`filler:${i}`, chunk)));
    const used = Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))![1]);
    await admin.config('SET', 'maxmemory', String(used - 262_144));
    await expect(admin.set('one-more', 'x')).rejects.toThrow(/^OOM/);
  }

  /** Every key of `locks` whose name contains `name`. */
  async function keysOf(locks: LockClient, name: string): Promise<string[]> {
    return admin.keys(`${locks.keyPrefix}:*${name}*`);
  }

  it('a full Redis: every kind of acquisition fails with RedisRefusedError (OOM), once its wait is over, and writes nothing', async () => {
    const locks = await client();
    await fillMemory();
    const attempts: [string, (waitTime: number) => Promise<unknown>][] = [
      ['reentrant', (waitTime) => locks.getLock('reentrant').lock({ waitTime })],
      ['fair', (waitTime) => locks.getFairLock('fair').lock({ waitTime })],
      ['simple', (waitTime) => locks.getSimpleLock('simple').lock({ waitTime })],
      ['semaphore', (waitTime) => locks.getSemaphore('semaphore', { permits: 2 }).acquire({ waitTime })],
      ['read', (waitTime) => locks.getReadWriteLock('read').readLock().lock({ waitTime })],
      ['write', (waitTime) => locks.getReadWriteLock('write').writeLock().lock({ waitTime })],
    ];
    for (const [name, attempt] of attempts) {
      for (const waitTime of [0, 300]) {
        const startedAt = Date.now();
        const error = (await attempt(waitTime).then(
          () => undefined,
          (e: unknown) => e,
        )) as RedisRefusedError;
        const elapsed = Date.now() - startedAt;
        expect(error).toBeInstanceOf(RedisRefusedError);
        expect(error.name).toBe('RedisRefusedError');
        expect(error.key).toBe(name);
        expect(error.code).toBe('OOM');
        expect(error.message).toMatch(new RegExp(`^Redis refused "lock" for lock "${name}": OOM .*maxmemory`));
        // A single attempt fails at once; a wait tries again until it is over, like through an outage.
        if (waitTime === 0) expect(elapsed).toBeLessThan(1_000);
        else expect(elapsed).toBeGreaterThanOrEqual(250);
        expect(elapsed).toBeLessThan(3_000);
        expect(await keysOf(locks, name)).toEqual([]); // not queued, not counted, not half-written
      }
    }
    // A wait under way gets the lock once there is room again.
    const waiting = locks.getFairLock('fair').lock({ waitTime: 10_000 });
    await sleep(500);
    await admin.config('SET', 'maxmemory', '0');
    const handle = await waiting;
    expect(await handle.release()).toBe('released');
  }, 30_000);

  it('a full Redis still releases, renews and hands locks over', async () => {
    const keyPrefix = `rf-${randomUUID().slice(0, 8)}`;
    const locks = await client({ watchdogTimeout: 1_500, keyPrefix });
    const other = await client({ keyPrefix });
    const watched = await locks.getLock('watched').lock(); // renewed every 500 ms
    const fairHeld = await locks.getFairLock('fair').lock();
    // Queued before memory runs out; handed the lock by the release below, under a full Redis.
    const fairWaiter = other.getFairLock('fair').lock({ waitTime: 10_000 });
    await eventually(async () => (await admin.llen(`${locks.keyPrefix}:{fair}:queue`).catch(() => 0)) > 0, 5_000);
    const simple = await locks.getSimpleLock('simple').lock({ leaseTime: 10_000 });
    await fillMemory();

    // Renewals run: the watched lock outlives its 1.5 s lease several times over.
    await sleep(3_000);
    expect(watched.signal.aborted).toBe(false);
    expect(await admin.exists(`${locks.keyPrefix}:{watched}`)).toBe(1);

    // The fair lock goes to the waiter that queued for it, which accepts it, memory full or not.
    expect(await fairHeld.release()).toBe('released');
    const handedOver = (await fairWaiter) as LockHandle;
    expect(await admin.hget(`${locks.keyPrefix}:{fair}`, handedOver.owner)).toBe('1');

    expect(await handedOver.release()).toBe('released');
    expect(await watched.release()).toBe('released');
    expect(await simple.release()).toBe('released');
    expect(
      await admin.exists(`${locks.keyPrefix}:{watched}`, `${locks.keyPrefix}:{fair}`, `${locks.keyPrefix}:{simple}`),
    ).toBe(0);
  }, 30_000);

  it('a full Redis: permits handed to a waiter are claimed by its call (its own lease is shorter than the acceptance lease); a new grant is refused', async () => {
    const keyPrefix = `rf-${randomUUID().slice(0, 8)}`;
    const locks = await client({ keyPrefix });
    const other = await client({ keyPrefix });
    // The hand-over's message cannot vouch for a lease shorter than the acceptance lease: the waiter
    // claims its hold with a call of its own, which writes nothing new (a renewal of a granted hold).
    const options = { permits: 1, acceptanceLease: 6_000 };
    const semaphore = locks.getSemaphore('claimed', options);
    const held = await semaphore.acquire();
    const waiting = other.getSemaphore('claimed', options).acquire({ leaseTime: 3_000, waitTime: 4_000 });
    waiting.catch(() => undefined);
    await eventually(async () => (await admin.zcard(semaphore.keys.waiting)) === 1, 5_000);
    await sleep(300); // subscribed, and refused again since
    await fillMemory();
    expect(await held.release()).toBe('released'); // hands the permit over, memory full or not
    const outcome = await waiting.then(
      (handle) => handle,
      (error: unknown) => error,
    );
    expect(outcome).not.toBeInstanceOf(Error);
    const handle = outcome as LockHandle;
    expect(handle.signal.aborted).toBe(false);
    // Claimed: Redis keeps it for the waiter's own lease, not the acceptance lease.
    const [seconds, micros] = await admin.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const leaseLeft = Number(await admin.zscore(semaphore.keys.holds, handle.owner)) - now;
    expect(leaseLeft).toBeGreaterThan(1_000);
    expect(leaseLeft).toBeLessThanOrEqual(3_000);
    // A grant of permits not held yet needs memory: refused.
    const refused = await locks
      .getSemaphore('claimed-new', { permits: 1 })
      .tryAcquire()
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RedisRefusedError);
    expect((refused as RedisRefusedError).code).toBe('OOM');
    expect(await handle.release()).toBe('released');
  }, 30_000);

  it('a Redis that cannot save to disk (MISCONF): acquisitions refused; a release is sent again until it can write', async () => {
    const locks = await client();
    const held = await locks.getLock('kept').lock({ leaseTime: 20_000 });
    const key = `${locks.keyPrefix}:{kept}`;
    // A save point, and a directory where the snapshot must go: the save fails and Redis stops writes.
    const [, dir] = (await admin.config('GET', 'dir')) as string[];
    const [, file] = (await admin.config('GET', 'dbfilename')) as string[];
    const blocker = join(dir, file);
    mkdirSync(blocker);
    try {
      await admin.config('SET', 'save', '3600 1');
      await admin.bgsave();
      await eventually(async () => /^rdb_last_bgsave_status:err/m.test(await admin.info('persistence')), 10_000);

      const error = (await locks
        .getLock('refused')
        .tryLock({ waitTime: 0 })
        .catch((e: unknown) => e)) as RedisRefusedError;
      expect(error).toBeInstanceOf(RedisRefusedError);
      expect(error.code).toBe('MISCONF');
      expect(error.key).toBe('refused');
      expect(await held.release()).toBe('pending');
      await sleep(300);
      expect(await admin.exists(key)).toBe(1); // not released yet: Redis takes no write

      await admin.config('SET', 'save', ''); // no save point: writes are taken again
      await eventually(async () => (await admin.exists(key)) === 0, 5_000); // the release, sent again, landed
    } finally {
      await admin.config('SET', 'save', '');
      rmSync(blocker, { recursive: true, force: true });
    }
  }, 30_000);

  it('a user without permission to run scripts: RedisRefusedError (NOPERM), before anything is written', async () => {
    await admin.call('ACL', 'SETUSER', 'no-scripts', 'on', '>x', '~*', '&*', '+@all', '-evalsha', '-eval', '-script');
    try {
      const locks = await client({ username: 'no-scripts' });
      const error = (await locks
        .getLock('denied')
        .lock({ waitTime: 1_000 })
        .catch((e: unknown) => e)) as RedisRefusedError;
      expect(error).toBeInstanceOf(RedisRefusedError);
      expect(error.code).toBe('NOPERM');
      expect(error.key).toBe('denied');
      expect(error.message).toContain('see "Redis users (ACL)" in docs/deployments.md');
      expect(await keysOf(locks, 'denied')).toEqual([]);
    } finally {
      await admin.call('ACL', 'DELUSER', 'no-scripts');
    }
  });

  describe("a user without the lock channels (a new user's default on Redis 7: resetchannels)", () => {
    const USER = 'no-channels';
    beforeEach(() => admin.call('ACL', 'SETUSER', USER, 'reset', 'on', '>x', '~*', 'resetchannels', '+@all'));
    afterEach(() => admin.call('ACL', 'DELUSER', USER));

    const connectionsOf = async (user: string) =>
      String(await admin.client('LIST'))
        .split('\n')
        .filter((line) => line.includes(` user=${user} `)).length;

    /** What start-up must say: NOPERM, with the channel pattern to grant. */
    const expectChannelRefusal = (error: unknown, prefix: string) => {
      expect(error).toBeInstanceOf(RedisRefusedError);
      expect((error as RedisRefusedError).code).toBe('NOPERM');
      expect((error as RedisRefusedError).message).toContain(`Grant the user the lock channels: &${prefix}:*`);
    };

    it('createLockClient fails with RedisRefusedError (NOPERM) naming the channels, and leaves no connection open', async () => {
      // Without the check it would start, take and release uncontended locks, and fail at the first wait.
      const error = await client({ username: USER, keyPrefix: 'lock' }).catch((e: unknown) => e);
      expectChannelRefusal(error, 'lock');
      await eventually(async () => (await connectionsOf(USER)) === 0, 5_000);
      expect(await admin.dbsize()).toBe(0);
    });

    it('connectRedLockMasters fails the same way', async () => {
      const master = {
        type: 'single' as const,
        host: '127.0.0.1',
        port: PORT,
        redisOptions: { username: USER, password: 'x' },
      };
      const error = await connectRedLockMasters([master, master, master], { keyPrefix: 'rl', logger }).catch(
        (e: unknown) => e,
      );
      expectChannelRefusal(error, 'rl');
      await eventually(async () => (await connectionsOf(USER)) === 0, 5_000);
    });

    it('a client passed in: refused if it is ready at start-up (and left open), not waited for if it is not', async () => {
      const ready = new Redis({ port: PORT, username: USER, password: 'x' });
      const lazy = new Redis({ port: PORT, username: USER, password: 'x', lazyConnect: true });
      try {
        await ready.ping();
        const error = await createLockClient({
          connection: { type: 'client', client: ready },
          keyPrefix: 'own',
          logger,
        }).catch((e: unknown) => e);
        expectChannelRefusal(error, 'own');
        expect(ready.status).toBe('ready'); // the user's to close
        // Not connected yet: start-up does not wait for Redis, so nothing is checked; the first wait says it.
        const locks = await createLockClient({
          connection: { type: 'client', client: lazy },
          keyPrefix: 'own',
          logger,
        });
        try {
          const held = await locks.getLock('late').lock();
          const waited = await locks
            .getLock('late')
            .lock({ waitTime: 1_000 })
            .catch((e: unknown) => e);
          expect(waited).toMatchObject({ name: 'RedisRefusedError', code: 'NOPERM' });
          await admin.call('ACL', 'SETUSER', USER, '&own:*');
          expect(await held.release()).toBe('released');
        } finally {
          await locks.close();
        }
      } finally {
        ready.disconnect();
        lazy.disconnect();
      }
    });

    it('a client built on such a connection by hand: a refused release keeps the hold, a wait fails typed', async () => {
      const redis = new Redis({ port: PORT, username: USER, password: 'x', maxRetriesPerRequest: 1 });
      const locks = new LockClient({ redis, keyPrefix: `rf-${randomUUID().slice(0, 8)}`, logger });
      try {
        const holds: LockHandle[] = [];
        for (const [kind, take] of [
          ['simple', (name: string) => locks.getSimpleLock(name).lock()],
          ['write', (name: string) => locks.getReadWriteLock(name).writeLock().lock()],
        ] as const) {
          const held = await take(kind); // uncontended: no channel involved
          holds.push(held);
          const keys = await keysOf(locks, kind);
          // Every release of these kinds publishes: refused, typed, and before anything changed.
          const refused = await held.release().catch((e: unknown) => e);
          expect(refused).toBeInstanceOf(RedisRefusedError);
          expect((refused as RedisRefusedError).code).toBe('NOPERM');
          expect((refused as RedisRefusedError).key).toBe(kind);
          expect(await keysOf(locks, kind)).toEqual(keys);
          // A wait cannot subscribe: refused at once, not after its waitTime.
          const startedAt = Date.now();
          const waited = await take(kind).catch((e: unknown) => e);
          expect(waited).toBeInstanceOf(RedisRefusedError);
          expect((waited as RedisRefusedError).code).toBe('NOPERM');
          expect(Date.now() - startedAt).toBeLessThan(2_000);
        }
        // Granted the channels, the holds (still theirs) are released as usual.
        await admin.call('ACL', 'SETUSER', USER, `&${locks.keyPrefix}:*`);
        for (const held of holds) {
          expect(held.isLost).toBe(false);
          expect(await held.release()).toBe('released');
        }
        const left = [...(await keysOf(locks, 'simple')), ...(await keysOf(locks, 'write'))];
        // Fencing counters stay, and the records of recent holds and releases (a minute: see hold-ids.lua).
        const records = [':fence', ':releases', ':grants'];
        expect(left.filter((key) => !records.some((suffix) => key.endsWith(suffix)))).toEqual([]);
      } finally {
        await locks.close();
        redis.disconnect();
      }
    });
  });

  it("a user with just docs/deployments.md's permissions can take, wait for, inspect and release every kind of lock", async () => {
    const page = readFileSync(join(__dirname, '..', '..', 'docs', 'deployments.md'), 'utf8');
    const rules = /^ACL SETUSER locks on >secret (.+)$/m.exec(page)![1].split(' ');
    await admin.call('ACL', 'SETUSER', 'documented-locks', 'on', '>x', ...rules);
    try {
      const locks = await client({ username: 'documented-locks', keyPrefix: 'lock' });
      const rival = await client({ username: 'documented-locks', keyPrefix: 'lock' });
      for (const kind of ['reentrant', 'fair', 'simple'] as const) {
        const lockOf = (c: LockClient) =>
          kind === 'reentrant' ? c.getLock(kind) : kind === 'fair' ? c.getFairLock(kind) : c.getSimpleLock(kind);
        const held = await lockOf(locks).lock();
        const waiting = lockOf(rival).lock({ waitTime: 5_000 }); // sleeps on pub/sub, woken by the release
        await sleep(100);
        expect((await locks.inspect(kind)).holders).toHaveLength(1);
        expect(await held.release()).toBe('released');
        expect(await (await waiting).release()).toBe('released');
      }
      const permit = await locks.getSemaphore('semaphore', { permits: 1 }).acquire();
      expect(await permit.release()).toBe('released');
      const rw = locks.getReadWriteLock('rw');
      await rw.readLock().withLock(() => rw.readLock().withLock(() => undefined));
      await rw.writeLock().withLock(() => undefined);
      expect((await locks.health()).healthy).toBe(true);
    } finally {
      await admin.call('ACL', 'DELUSER', 'documented-locks');
    }
  }, 30_000);

  it('a server demoted to a replica under a single connection: READONLY is a refusal at once (RedisRefusedError), and a holder whose renewals are refused hears "refused"', async () => {
    const locks = await client({ watchdogTimeout: 1_500 });
    const held = await locks.getLock('demoted-held').lock();
    // Demoted (REPLICAOF), as a manual promotion of a replica does to the old master: read-only from now on.
    await admin.call('REPLICAOF', '127.0.0.1', '1');
    try {
      for (const attempt of [
        () => locks.getLock('demoted').lock({ waitTime: 5_000 }),
        () => locks.getFairLock('demoted-fair').tryLock(),
        () => locks.getSemaphore('demoted-sem', { permits: 2 }).acquire({ waitTime: 5_000 }),
      ]) {
        const started = Date.now();
        const error = await attempt().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RedisRefusedError);
        expect((error as RedisRefusedError).code).toBe('READONLY');
        expect((error as Error).message).toMatch(/does not follow promotions.*sentinel/i);
        expect(Date.now() - started).toBeLessThan(2_000); // at once, not after waiting out an "outage"
      }
      // The watchdog cannot renew on a read-only server: at the lease's end the holder is told why.
      await eventually(() => held.signal.aborted, 5_000);
      expect((held.signal.reason as { reason: string }).reason).toBe('refused');
    } finally {
      await admin.call('REPLICAOF', 'NO', 'ONE');
    }
  });

  it('a Redis busy with a long script: RedisUnavailableError for a single attempt; a wait rides it out', async () => {
    const locks = await client();
    await locks.getLock('busy').withLock(() => undefined); // scripts loaded, connection warm
    await admin.config('SET', 'busy-reply-threshold', '100');
    const blocker = new Redis({ port: PORT, maxRetriesPerRequest: 1 });
    try {
      // Runs 1.5 s; past 100 ms every other command is answered BUSY.
      const busy = blocker.eval(
        "local s = redis.call('time') repeat local n = redis.call('time') until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 1500000 return 1",
        0,
      );
      await sleep(400);
      const single = await locks
        .getLock('busy')
        .tryLock({ waitTime: 0 })
        .catch((e: unknown) => e);
      expect(single).toBeInstanceOf(RedisUnavailableError);
      expect((single as Error).message).toMatch(/BUSY/);
      const startedAt = Date.now();
      const handle = await locks.getLock('busy').lock({ waitTime: 10_000 });
      await busy;
      expect(Date.now() - startedAt).toBeLessThan(8_000);
      expect(await handle.release()).toBe('released');
    } finally {
      blocker.disconnect();
      await admin.config('SET', 'busy-reply-threshold', '5000');
    }
  }, 30_000);

  it('a Redis that may evict keys is warned about once per setting; one that cannot evict is not', async () => {
    const evictionWarnings = () => warnings.filter((w) => w.includes('may evict locks'));
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru'); // no limit: nothing is ever evicted
    await (await client()).close();
    await admin.config('SET', 'maxmemory', '1gb');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await (await client()).close();
    expect(evictionWarnings()).toEqual([]);

    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    const locks = await client();
    await eventually(() => evictionWarnings().length > 0, 5_000);
    expect(evictionWarnings()).toEqual([
      expect.stringMatching(
        new RegExp(
          `^Redis at 127\\.0\\.0\\.1:${PORT} may evict locks: maxmemory 1073741824 bytes with maxmemory-policy volatile-lru\\.`,
        ),
      ),
    ]);
    // A reconnect reads it again, and does not repeat itself.
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await eventually(() => locks.redis.status === 'ready', 5_000);
    await locks.getLock('after-reconnect').withLock(() => undefined);
    await sleep(300);
    expect(evictionWarnings()).toHaveLength(1);
  }, 30_000);
});
