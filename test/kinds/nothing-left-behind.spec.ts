import type { Redis } from 'ioredis';
import { LockClient, MultiLock, RedLock } from '../../lib';
import { RedisPubSub } from '../../lib/internal';
import { lockKeys, readWriteKeys, semaphoreKeys } from '../../lib/engine/redis/keys';
import {
  connect,
  eventually,
  lockClient,
  quietLogger,
  singlePort,
  sleep,
  testPrefix,
  type TestClient,
} from '../support/engine';
import { serverMicros } from '../support/fencing';
import { sharedTopology } from '../support/topologies';

/**
 * Issue 41: a lock name costs Redis nothing once it is unused, and its fencing tokens still never go
 * back, for every kind: no key ever lacks a TTL, none outlives the minute a hold's record is remembered
 * (see hold-ids.lua) once idle, nothing keeps one alive after the clients are gone, and the next token is
 * larger than every one before, whether the counter expired, vanished or went back.
 */
const KINDS = ['reentrant', 'fair', 'simple', 'read', 'write', 'semaphore', 'multi'] as const;
type Kind = (typeof KINDS)[number];

interface Taken {
  token: number;
  release(): Promise<unknown>;
}

/** Takes `name` as `kind` through the public API (a MultiLock: a reentrant and a fair lock under it). */
async function take(locks: LockClient, kind: Kind, name: string, leaseTime?: number): Promise<Taken> {
  const options = leaseTime === undefined ? {} : { leaseTime };
  const handle = await (() => {
    switch (kind) {
      case 'reentrant':
        return locks.getLock(name).lock(options);
      case 'fair':
        return locks.getFairLock(name).lock(options);
      case 'simple':
        return locks.getSimpleLock(name).lock({ waitTime: 60_000, ...options });
      case 'read':
        return locks.getReadWriteLock(name).readLock().lock(options);
      case 'write':
        return locks.getReadWriteLock(name).writeLock().lock(options);
      case 'semaphore':
        return locks.getSemaphore(name, { permits: 1 }).acquire(options);
      case 'multi':
        return null;
    }
  })();
  if (handle) return { token: handle.fencingToken, release: () => handle.release() };
  const group = await new MultiLock([locks.getLock(`${name}:a`), locks.getFairLock(`${name}:b`)]).lock(options);
  return { token: Math.min(...group.fencingTokens.map(Number)), release: () => group.release() };
}

/** The fencing counters a name of `kind` uses. */
function fencesOf(prefix: string, kind: Kind, name: string): string[] {
  if (kind === 'read' || kind === 'write') return [readWriteKeys(prefix, name).fence];
  if (kind === 'semaphore') return [semaphoreKeys(prefix, name).fence];
  if (kind === 'multi') return [lockKeys(prefix, `${name}:a`).fence, lockKeys(prefix, `${name}:b`).fence];
  return [lockKeys(prefix, name).fence];
}

/** Every key under `prefix` with its PTTL. */
async function keysUnder(redis: Redis, prefix: string): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    const pipeline = redis.pipeline();
    keys.forEach((key) => pipeline.pttl(key));
    const ttls = (await pipeline.exec()) ?? [];
    keys.forEach((key, i) => found.set(key, ttls[i][1] as number));
  } while (cursor !== '0');
  return found;
}

/** What an unused name may leave for a while: the counter (a lease + idle) or a hold's record (a minute). */
const RECORD_MEMORY_MS = 60_000;
const IDLE = 1_500;

describe('nothing left behind: no key without a TTL, and tokens that never go back', () => {
  const prefix = testPrefix();
  let clients: TestClient[] = [];
  const open = (options: Parameters<typeof lockClient>[0] = {}) => {
    const client = lockClient({ keyPrefix: prefix, idleKeyTtl: IDLE, ...options });
    clients.push(client);
    return client;
  };
  afterEach(async () => {
    await Promise.all(clients.map((c) => c.close()));
    clients = [];
  });

  it('every kind and a RedLock: many names, raced by three clients, leave no key without a TTL, none longer than a minute, none kept alive once idle', async () => {
    const racers = [open(), open(), open()];
    const masters = sharedTopology('multi').masters.map((m) => open({ port: m.port, operationTimeout: 1_000 }));
    await Promise.all(masters.map((m) => m.redis.ping()));
    const before = await Promise.all(masters.map((m) => serverMicros(m.redis)));
    const names = 120;
    // Three clients race for each name at once (each takes and releases it), every kind side by side;
    // meanwhile RedLocks over the independent masters, one name after another.
    const kinds = Promise.all(
      KINDS.map(async (kind) => {
        for (let batch = 0; batch < names; batch += 20) {
          await Promise.all(
            Array.from({ length: 20 }, (_, i) => `${kind}:${batch + i}`).flatMap((name) =>
              racers.map(async ({ locks }) => (await take(locks, kind, name)).release()),
            ),
          );
        }
      }),
    );
    const redLocks = (async () => {
      for (let i = 0; i < 40; i++) {
        const handle = await new RedLock(
          masters.map((m) => m.locks),
          `red:${i}`,
        ).lock({ leaseTime: 5_000 });
        // Each master's token comes from its own clock.
        handle.fencingTokens.forEach((token, m) => token !== null && expect(token).toBeGreaterThan(before[m]));
        await handle.release();
      }
    })();
    await Promise.all([kinds, redLocks]);
    const servers = [racers[0].redis, ...masters.map((m) => m.redis)];
    const left = new Map<string, number>();
    for (const redis of servers) for (const [key, ttl] of await keysUnder(redis, prefix)) left.set(key, ttl);
    expect(left.size).toBeGreaterThan(0);
    const forever = [...left].filter(([, ttl]) => ttl === -1).map(([key]) => key);
    expect(forever).toEqual([]);
    // Nothing lives longer than a hold's record (a minute) or a watchdog lease plus the idle TTL.
    expect(Math.max(...left.values())).toBeLessThanOrEqual(Math.max(RECORD_MEMORY_MS, 30_000 + IDLE));
    // Once every client is closed nothing can touch these keys again, so Redis removes each one within
    // its TTL: checked, rather than waited out (a minute), by seeing every TTL run down, no key renewed or
    // created, over 2 s from connections of the test's own.
    const ports = servers.map((redis) => redis.options.port!);
    await Promise.all(clients.map((c) => c.close()));
    clients = [];
    const observers = ports.map((port) => connect(port));
    try {
      const everyKey = async (): Promise<Map<string, number>> => {
        const found = new Map<string, number>();
        for (const [i, redis] of observers.entries())
          for (const [key, ttl] of await keysUnder(redis, prefix)) found.set(`${ports[i]} ${key}`, ttl);
        return found;
      };
      const first = await everyKey();
      expect(first.size).toBeGreaterThan(0);
      // -2: gone between KEYS and PTTL (a short TTL ran out, such as a semaphore's hand-over, or a release of a
      // RedLock's last master, answered after the quorum, landed).
      expect([...first.values()].filter((ttl) => ttl <= 0 && ttl !== -2)).toEqual([]);
      await sleep(2_000);
      const renewed = [...(await everyKey())].filter(([key, ttl]) => !first.has(key) || ttl > first.get(key)! - 1_500);
      expect(renewed).toEqual([]);
    } finally {
      observers.forEach((redis) => redis.disconnect());
    }
  }, 150_000);

  it('every kind and a RedLock: a holder and a waiter that die mid-wait (nothing released, nobody back) leave no key without a TTL', async () => {
    // A process that dies: its connections close and never come back, and nothing of it is released.
    const dying: { locks: LockClient; cut(): void }[] = [];
    const doomedClient = (port?: number) => {
      const [redis, subscriber] = [0, 1].map(() => {
        const connection = connect(port);
        connection.options.retryStrategy = () => null;
        return connection;
      });
      const locks = new LockClient({
        redis,
        pubsub: new RedisPubSub(subscriber, false, true),
        keyPrefix: prefix,
        idleKeyTtl: IDLE,
        operationTimeout: 500,
        logger: quietLogger,
      });
      const client = { locks, cut: () => [redis, subscriber].forEach((c) => c.disconnect()) };
      dying.push(client);
      return client;
    };
    const waiterKind: Record<Kind, Kind> = {
      ...Object.fromEntries(KINDS.map((k) => [k, k])),
      read: 'write',
      write: 'read',
    } as Record<Kind, Kind>;
    const waits: Promise<unknown>[] = [];
    for (const kind of KINDS) {
      await take(doomedClient().locks, kind, `dies:${kind}`, 1_000);
      waits.push(take(doomedClient().locks, waiterKind[kind], `dies:${kind}`).catch(() => undefined));
    }
    const masters = sharedTopology('multi').masters;
    const redLockOver = () => masters.map((m) => doomedClient(m.port).locks);
    await new RedLock(redLockOver(), 'dies:red').lock({ leaseTime: 1_000 });
    waits.push(new RedLock(redLockOver(), 'dies:red').lock({ waitTime: 60_000 }).catch(() => undefined));
    await sleep(500); // every waiter has asked, been refused and registered or queued
    dying.forEach((d) => d.cut());
    await sleep(2_500); // the leases ran out: whatever is left is what nobody will ever touch again
    const observers = [singlePort(), ...masters.map((m) => m.port)].map((port) => connect(port));
    try {
      const left = new Map<string, number>();
      for (const redis of observers) for (const [key, ttl] of await keysUnder(redis, prefix)) left.set(key, ttl);
      expect([...left].filter(([key]) => key.includes('dies:')).length).toBeGreaterThan(0);
      expect([...left].filter(([, ttl]) => ttl === -1).map(([key]) => key)).toEqual([]);
      expect(Math.max(...left.values())).toBeLessThanOrEqual(RECORD_MEMORY_MS);
    } finally {
      observers.forEach((redis) => redis.disconnect());
      await Promise.all(dying.map((d) => d.locks.close().catch(() => undefined)));
      await Promise.all(waits);
    }
  }, 60_000);

  it.each(KINDS)('%s: the next token is larger after the counter expired with the idle name', async (kind) => {
    const { locks, redis } = open();
    const name = `expiry-${kind}`;
    const floor = await serverMicros(redis);
    const first = await take(locks, kind, name, 500);
    expect(Number.isSafeInteger(first.token)).toBe(true);
    expect(first.token).toBeGreaterThanOrEqual(floor); // from Redis's clock, not from 1
    await first.release();
    const fences = fencesOf(prefix, kind, name);
    for (const fence of fences) {
      const ttl = await redis.pttl(fence);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(500 + IDLE);
    }
    // The lease and the idle TTL pass: the counter is gone.
    await eventually(async () => (await redis.exists(...fences)) === 0, 10_000, 100);
    const second = await take(locks, kind, name, 500);
    expect(second.token).toBeGreaterThan(first.token);
    await second.release();
  });

  it.each(KINDS)(
    '%s: a counter deleted or set back (a restart, a lagging replica) never gives a smaller token',
    async (kind) => {
      const { locks, redis } = open();
      const name = `lost-${kind}`;
      const first = await take(locks, kind, name, 10_000);
      await first.release();
      // Everything of the name vanishes, as after a restart without persistence or a FLUSHALL.
      const fences = fencesOf(prefix, kind, name);
      await redis.del(...fences);
      const second = await take(locks, kind, name, 10_000);
      expect(second.token).toBeGreaterThan(first.token);
      await second.release();
      // A promoted replica that missed the last grants has an older counter. (A read takes the last
      // write's token, whatever the counter says: the write after it is what must be larger.)
      for (const fence of fences) await redis.set(fence, String(second.token - 5_000_000), 'PX', 60_000);
      const third = await take(locks, kind === 'read' ? 'write' : kind, name, 10_000);
      expect(third.token).toBeGreaterThan(second.token);
      await third.release();
    },
  );

  it.each(['reentrant', 'fair', 'write'] as const)(
    '%s: a hold renewed past the idle TTL keeps its counter, so its re-entries and release still count',
    async (kind) => {
      const { locks, redis } = open({ watchdogTimeout: 900 });
      const name = `long-${kind}`;
      const lock =
        kind === 'reentrant'
          ? locks.getLock(name)
          : kind === 'fair'
            ? locks.getFairLock(name)
            : locks.getReadWriteLock(name).writeLock();
      await lock.withLock(async ({ fencingToken }) => {
        await sleep(IDLE + 1_500); // longer than the idle TTL and the first lease together
        expect(await redis.exists(...fencesOf(prefix, kind, name))).toBe(1);
        const inner = await lock.lock(); // a re-entry, from inside the critical section
        expect(inner.fencingToken).toBe(fencingToken);
        expect(await inner.release()).toBe('decremented');
      });
      expect(await lock.isLocked()).toBe(false); // the outer release counted too
    },
  );

  it("a semaphore's run-time limit lives while its permits are held and the idle TTL after, then the configured one applies", async () => {
    const { locks, redis } = open({ watchdogTimeout: 900 });
    const semaphore = locks.getSemaphore('limit', { permits: 3 });
    await semaphore.setPermits(1);
    const { limit } = semaphoreKeys(prefix, 'limit');
    expect(await redis.pttl(limit)).toBeGreaterThan(0);
    const held = await semaphore.acquire(); // renewed by the watchdog
    await sleep(IDLE + 1_500);
    expect(await redis.get(limit)).toBe('1');
    expect(await semaphore.tryAcquire()).toBeNull(); // the stored limit still rules
    await held.release();
    await eventually(async () => (await redis.exists(limit)) === 0, 10_000, 100);
    const handles = await Promise.all([semaphore.acquire(), semaphore.acquire()]); // the configured 3 again
    await Promise.all(handles.map((h) => h.release()));
  }, 30_000);
});
