import { engineOf, LockNotHeldError, runInLockScope, SIMPLE_LOCK_DEFAULTS } from '../../lib/internal';
import { lockClient, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';
import { killAll, raceCounter, type Worker } from '../support/workers';

describe('SimpleLock', () => {
  const prefix = testPrefix();
  let client: TestClient;
  let other: TestClient;
  let name: string;
  const workers: Worker[] = [];

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix });
    other = lockClient({ keyPrefix: prefix });
  });
  beforeEach(() => (name = `simple-${Math.random().toString(36).slice(2)}`));
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    await client.close();
    await other.close();
  });

  it('is a string set with NX PX, 3 s lease by default, a token unique to each acquisition', async () => {
    expect(SIMPLE_LOCK_DEFAULTS).toEqual({ waitTime: 3_000, leaseTime: 3_000 });
    const lock = client.locks.getSimpleLock(name);
    const first = await lock.lock();
    const firstToken = await client.redis.get(lock.keys.lock);
    const pttl = await client.redis.pttl(lock.keys.lock);
    expect(pttl).toBeGreaterThan(2_000);
    expect(pttl).toBeLessThanOrEqual(3_000);
    expect(engineOf(client.locks).watchdog.size).toBe(0);
    expect(await first.release()).toBe('released');
    const second = await lock.lock();
    const secondToken = await client.redis.get(lock.keys.lock);
    expect(secondToken).not.toBe(firstToken);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
    await second.release();
  });

  it('doWithLock tells the callback whether it got the lock and releases afterwards', async () => {
    const lock = client.locks.getSimpleLock(name);
    const ran = await lock.doWithLock(async (ctx) => {
      expect(ctx.isSuccess).toBe(true);
      if (ctx.isSuccess) expect(ctx.fencingToken).toBeGreaterThan(0);
      expect(await client.redis.exists(lock.keys.lock)).toBe(1);
      return 'ran';
    });
    expect(ran).toBe('ran');
    expect(await lock.isLocked()).toBe(false);

    const held = await other.locks.getSimpleLock(name).lock({ leaseTime: 5_000 });
    const started = Date.now();
    const outcome = await lock.doWithLock((ctx) => ctx.isSuccess, { waitTime: 300 });
    expect(outcome).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await held.release();
  });

  it('is not re-entrant: the same scope waits like anyone else', async () => {
    const lock = client.locks.getSimpleLock(name);
    await runInLockScope(async () => {
      const handle = await lock.lock();
      expect(await lock.tryLock()).toBeNull();
      expect(await lock.unlock()).toBe('released');
      await expect(lock.unlock()).rejects.toBeInstanceOf(LockNotHeldError);
      expect(await handle.release()).toBe('released'); // already released: reported, not sent again
    });
  });

  it('release after expiry says expired; a new holder is left alone (compare-and-delete)', async () => {
    const lock = client.locks.getSimpleLock(name);
    const stale = await lock.lock({ leaseTime: 200 });
    await sleep(350);
    const fresh = await other.locks.getSimpleLock(name).lock();
    expect(await stale.release()).toBe('expired');
    expect(await lock.isLocked()).toBe(true);
    expect(await fresh.release()).toBe('released');
  });

  it('waiters are woken by pub/sub, not a 10 ms spin', async () => {
    const held = await other.locks.getSimpleLock(name).lock({ leaseTime: 60_000 });
    const waiting = client.locks.getSimpleLock(name).lock({ waitTime: 30_000 });
    await sleep(200);
    const releasedAt = Date.now();
    await held.release();
    const handle = await waiting;
    expect(Date.now() - releasedAt).toBeLessThan(1_000);
    await handle.release();
  });

  it.each(['watchdog', 'explicit'] as const)(
    '8 processes incrementing a racy counter lose no update (%s lease)',
    async (lease) => {
      const env = {
        REDIS_PORT: singlePort(),
        KEY_PREFIX: prefix,
        LOCK_KIND: 'simple',
        LOCK_NAME: `${name}-${lease}`,
        COUNTER_KEY: `${prefix}:counter:${name}-${lease}`,
        TOKENS_KEY: `${prefix}:tokens:${name}-${lease}`,
        DURATION_MS: 3_000,
        ...(lease === 'explicit' ? { LEASE_MS: 3_000 } : {}),
      };
      const { total } = await raceCounter(8, env, workers);
      expect(total).toBeGreaterThan(0);
      expect(Number(await client.redis.get(env.COUNTER_KEY))).toBe(total);
    },
    60_000,
  );
});
