import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient, runInLockScope, type LockBase, type LockHandle } from '../../lib';
import { quietLogger, sleep } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * An application's own ioredis client, at ioredis's defaults, sends a command again on the new
 * connection when the old one died before its reply came. A lock attempt whose reply was lost so
 * runs twice. The second run must not count a second hold (no caller would release it, and the lock
 * would stay for its lease) nor refuse the caller its own grant (a simple lock).
 */
describe("a lock attempt re-sent by the application's ioredis client after its reply was lost", () => {
  let proxy: ReplyDroppingProxy;
  let redis: Redis;
  let plain: Redis;
  let locks: LockClient;
  const keyPrefix = `ra-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    const upstream = sharedTopology('single').masters[0];
    proxy = await ReplyDroppingProxy.start(upstream);
    redis = new Redis({ host: '127.0.0.1', port: proxy.port }); // ioredis defaults: re-sends
    plain = new Redis(upstream);
    locks = new LockClient({ redis, keyPrefix, logger: quietLogger });
    await redis.ping();
  });
  afterAll(async () => {
    await locks.close();
    redis.disconnect();
    plain.disconnect();
    await proxy.close();
  });

  /** Each kind: take it (a waiting caller), and whether it is still held by anyone. */
  const KINDS: [string, (name: string) => Promise<LockHandle>, (name: string) => Promise<boolean>][] = [
    ['reentrant', (name) => locks.getLock(name).lock({ waitTime: 5_000 }), (name) => locks.getLock(name).isLocked()],
    ['fair', (name) => locks.getFairLock(name).lock({ waitTime: 5_000 }), (name) => locks.getFairLock(name).isLocked()],
    [
      'simple',
      (name) => locks.getSimpleLock(name).lock({ waitTime: 5_000 }),
      (name) => locks.getSimpleLock(name).isLocked(),
    ],
    [
      'write',
      (name) => locks.getReadWriteLock(name).writeLock().lock({ waitTime: 5_000 }),
      (name) => locks.getReadWriteLock(name).writeLock().isLocked(),
    ],
    [
      'read',
      (name) => locks.getReadWriteLock(name).readLock().lock({ waitTime: 5_000 }),
      (name) => locks.getReadWriteLock(name).readLock().isLocked(),
    ],
    [
      'semaphore',
      (name) => locks.getSemaphore(name, { permits: 1 }).acquire({ waitTime: 5_000 }),
      async (name) => (await locks.getSemaphore(name, { permits: 1 }).availablePermits()) === 0,
    ],
  ];

  it.each(KINDS)('%s: the grant counts once, and one release frees the lock', async (kind, take, isLocked) => {
    const name = `grant-${kind}`;
    const dropped = proxy.dropped;
    proxy.dropNextReply(/granted/);
    const startedAt = Date.now();
    const handle = await runInLockScope(() => take(name));
    expect(proxy.dropped).toBe(dropped + 1); // the reply was lost, and the attempt sent again
    // ioredis reconnects within moments; the caller is not kept waiting for its own grant's lease.
    expect(Date.now() - startedAt).toBeLessThan(1_500);
    expect(await handle.release()).toBe('released');
    expect(await isLocked(name)).toBe(false);
  });

  it.each(KINDS.filter(([kind]) => kind !== 'simple' && kind !== 'semaphore'))(
    '%s: a re-entry counts once, and two releases free the lock',
    async (kind, take, isLocked) => {
      const name = `reentry-${kind}`;
      await runInLockScope(async () => {
        const outer = await take(name);
        const dropped = proxy.dropped;
        proxy.dropNextReply(/reentered/);
        const inner = await take(name);
        expect(proxy.dropped).toBe(dropped + 1);
        expect(inner.fencingToken).toBe(outer.fencingToken);
        expect(await inner.release()).toBe('decremented');
        expect(await outer.release()).toBe('released');
      });
      expect(await isLocked(name)).toBe(false);
    },
  );

  it('the fencing token of a re-sent grant is the counter, and the next grant comes after it', async () => {
    const name = 'token';
    await (await locks.getLock(name).lock()).release();
    proxy.dropNextReply(/granted/);
    const handle = await locks.getLock(name).lock();
    expect(handle.fencingToken).toBe(Number(await plain.get(`${keyPrefix}:{${name}}:fence`)));
    await handle.release();
    const next = await locks.getLock(name).lock({ waitTime: 2_000 });
    expect(next.fencingToken).toBeGreaterThan(handle.fencingToken);
    await next.release();
  });
});

describe("a force unlock re-sent by the application's ioredis client after its reply was lost", () => {
  let proxy: ReplyDroppingProxy;
  let redis: Redis;
  const clients: LockClient[] = [];
  const keyPrefix = `rf-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    proxy = await ReplyDroppingProxy.start(sharedTopology('single').masters[0]);
    redis = new Redis({ host: '127.0.0.1', port: proxy.port }); // ioredis defaults: re-sends
    await redis.ping();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    for (const c of clients) c.redis.disconnect();
    redis.disconnect();
    await proxy.close();
  });

  /** A lock client of its own, as another process would have. */
  const client = (connection = new Redis(sharedTopology('single').masters[0])) => {
    const locks = new LockClient({ redis: connection, keyPrefix, logger: quietLogger });
    clients.push(locks);
    return locks;
  };
  const KINDS: [string, (locks: LockClient, name: string) => LockBase][] = [
    ['reentrant', (locks, name) => locks.getLock(name)],
    ['fair', (locks, name) => locks.getFairLock(name)],
    ['simple', (locks, name) => locks.getSimpleLock(name)],
    ['write', (locks, name) => locks.getReadWriteLock(name).writeLock()],
  ];

  it.each(KINDS)('%s: the repeat leaves the lock that a woken waiter took meanwhile', async (kind, lockOf) => {
    const name = `force-${kind}`;
    const [admin, holder, waiter] = [client(redis), client(), client()];
    const first = await lockOf(holder, name).lock({ leaseTime: 30_000 });
    const waiting = lockOf(waiter, name).lock({ waitTime: 10_000, leaseTime: 30_000 });
    await sleep(200); // parked: the force wakes it, and it takes the lock before ioredis sends the force again
    const dropped = proxy.dropped;
    proxy.dropNextReply(/^:1\r\n$/);
    expect(await lockOf(admin, name).forceUnlock()).toBe(true);
    expect(proxy.dropped).toBe(dropped + 1); // the reply was lost, and the force sent again
    const second = await waiting;
    await sleep(200);
    expect(await lockOf(holder, name).isLocked()).toBe(true); // the repeat did not delete the new hold
    expect(await second.release()).toBe('released');
    expect(await first.release()).toBe('expired');
  });
});

describe('concurrent acquisitions of one lock by one owner (a scope running two branches at once)', () => {
  it.each(['reentrant', 'fair', 'write', 'read'])(
    '%s: both re-enter, none is lost, and two releases free it',
    async (kind) => {
      const locks = new LockClient({
        redis: new Redis(sharedTopology('single').masters[0]),
        keyPrefix: `ca-${randomUUID().slice(0, 8)}`,
        logger: quietLogger,
      });
      const lost: unknown[] = [];
      locks.on('lockLost', (error) => lost.push(error));
      const lock =
        kind === 'reentrant'
          ? locks.getLock('both')
          : kind === 'fair'
            ? locks.getFairLock('both')
            : kind === 'write'
              ? locks.getReadWriteLock('both').writeLock()
              : locks.getReadWriteLock('both').readLock();
      try {
        await runInLockScope(async () => {
          const [a, b] = await Promise.all([lock.lock({ leaseTime: 10_000 }), lock.lock({ leaseTime: 10_000 })]);
          expect(await lock.getHoldCount()).toBe(2);
          expect([a.signal.aborted, b.signal.aborted]).toEqual([false, false]);
          expect(await a.release()).toBe('decremented');
          expect(await b.release()).toBe('released');
        });
        expect(await lock.isLocked()).toBe(false);
        expect(lost).toEqual([]);
      } finally {
        await locks.close();
        locks.redis.disconnect();
      }
    },
  );
});
