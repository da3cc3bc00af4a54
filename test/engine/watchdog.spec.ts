import { LockClient, LockLostError } from '../../lib';
import { engineOf } from '../../lib/internal';
import { DEFAULT_OPERATION_TIMEOUT } from '../../lib/engine/client/lock-client';
import { connect, eventually, lockClient, quietLogger, sleep, testPrefix, type TestClient } from '../support/engine';

describe('watchdog', () => {
  let client: TestClient;
  const prefix = testPrefix();
  const watchdogTimeout = 600;

  beforeAll(() => (client = lockClient({ keyPrefix: prefix, watchdogTimeout })));
  afterAll(() => client.close());

  it('keeps a lock held three times longer than watchdogTimeout, then stops renewing after unlock', async () => {
    // A lease of its own, longer than the suite's: a loaded machine's stall of 400 ms (600 ms lease,
    // renewed every 200 ms) let the lock run out in CI, which is the lease doing its job.
    const leaseMs = 1_500;
    const holder = lockClient({ keyPrefix: prefix, watchdogTimeout: leaseMs });
    const lock = holder.locks.getLock('long-hold');
    const other = lockClient({ keyPrefix: prefix, watchdogTimeout: leaseMs });
    try {
      const handle = await lock.lock();
      const until = Date.now() + 3 * leaseMs + 200;
      while (Date.now() < until) {
        expect(await holder.redis.pttl(lock.keys.lock)).toBeGreaterThan(0);
        expect(await other.locks.getLock('long-hold').tryLock()).toBeNull();
        await sleep(100);
      }
      expect(handle.isLost).toBe(false);
      expect(await handle.release()).toBe('released');
      expect(engineOf(holder.locks).watchdog.size).toBe(0);

      // No renewal traffic after the last unlock: nothing is sent for two renewal periods.
      const sent = jest.spyOn(holder.redis, 'sendCommand');
      await sleep(2 * leaseMs);
      const count = sent.mock.calls.length;
      sent.mockRestore();
      expect(count).toBe(0);
    } finally {
      await Promise.all([other.close(), holder.close()]);
    }
  });

  it('renews many held locks in one pipeline per tick, not one timer per lock', async () => {
    const handles = await Promise.all(Array.from({ length: 50 }, (_, i) => client.locks.getLock(`many-${i}`).lock()));
    const pipelines = jest.spyOn(client.redis, 'pipeline');
    await sleep(2 * watchdogTimeout + 100); // a tick every 200 ms: about 6 ticks
    const calls = pipelines.mock.calls.length;
    pipelines.mockRestore();
    expect(calls).toBeGreaterThanOrEqual(3);
    expect(calls).toBeLessThanOrEqual(10); // 50 locks, yet about one pipeline per tick
    for (const h of handles) expect(await client.redis.pttl(`${prefix}:{${h.name}}`)).toBeGreaterThan(0);
    await Promise.all(handles.map((h) => h.release()));
    expect(engineOf(client.locks).watchdog.size).toBe(0);
  });

  it('batches renewals: 1200 locks of two kinds in one pipeline of 3 calls; a key taken over by another kind is lost alone', async () => {
    // A longer lease than the other tests: acquiring 1200 locks on a busy machine must not outlast it.
    const batchWatchdog = 3_000;
    const batch = lockClient({ keyPrefix: prefix, watchdogTimeout: batchWatchdog });
    const names = Array.from({ length: 1_200 }, (_, i) => `batch-${i}`);
    const handles = await Promise.all(
      names.map((name, i) =>
        i % 2 ? batch.locks.getSimpleLock(name, { leaseTime: 'watchdog' }).lock() : batch.locks.getLock(name).lock(),
      ),
    );
    const stolen = batch.locks.getSimpleLock(names[1]);
    await batch.redis.del(stolen.keys.lock);
    await batch.redis.hset(stolen.keys.lock, 'someone-else', 1); // now a hash: the string renewal must not fail the others
    const pipelines = jest.spyOn(batch.redis, 'pipeline');
    const watchdog = engineOf(batch.locks).watchdog;
    // A tick of the watchdog's own timer may be running (1200 renewals on a loaded machine: CI saw it),
    // and tick() then returns at once: called until a tick sends a pipeline.
    for (let i = 0; i < 100 && pipelines.mock.results.length === 0; i++) {
      await watchdog.tick();
      if (pipelines.mock.results.length === 0) await sleep(50);
    }
    const queued = pipelines.mock.results.map((result) => (result.value as { length: number }).length);
    pipelines.mockRestore();
    expect(queued.length).toBeGreaterThan(0);
    expect(queued.every((calls) => calls === 3)).toBe(true); // one pipeline a tick: 500 + 500 + 200 locks
    await eventually(() => handles[1].signal.aborted, 5_000);
    expect((handles[1].signal.reason as LockLostError).reason).toBe('not-owner');
    expect(handles.filter((h) => h.signal.aborted)).toHaveLength(1);
    await sleep(batchWatchdog); // past the first lease: only renewals kept them
    const ttls = await Promise.all(handles.map((h, i) => (i === 1 ? 1 : batch.redis.pttl(`${prefix}:{${h.name}}`))));
    expect(ttls.every((ttl) => ttl > 0)).toBe(true);
    await Promise.all(handles.map((h) => h.release()));
    await batch.redis.del(stolen.keys.lock);
    await batch.close();
  });

  it('a lock first taken with a short leaseTime and re-entered without one is renewed with the watchdog lease', async () => {
    const lock = client.locks.getLock('short-then-watched');
    const owner = 'short-then-watched-owner';
    const first = await lock.lock({ owner, leaseTime: 150 });
    const second = await lock.lock({ owner }); // now watched: renewals every 200 ms must apply 600 ms, not 150
    await sleep(1_000);
    expect(first.signal.aborted).toBe(false);
    expect(await client.redis.pttl(lock.keys.lock)).toBeGreaterThan(150);
    await second.release();
    await first.release();
    expect(await lock.isLocked()).toBe(false);
  });

  it('an explicit leaseTime means no watchdog: the lock simply expires', async () => {
    const lock = client.locks.getLock('explicit');
    const handle = await lock.lock({ leaseTime: 400 });
    expect(engineOf(client.locks).watchdog.size).toBe(0);
    await eventually(async () => !(await lock.isLocked()), 3_000);
    expect(await handle.release()).toBe('expired');
  });

  it('a lock deleted behind the holder is reported lost: signal aborts, event fires, release says expired', async () => {
    const lock = client.locks.getLock('stolen');
    const events: LockLostError[] = [];
    client.locks.on('lockLost', (e) => events.push(e));
    await lock.withLock(async ({ signal }) => {
      await client.redis.del(lock.keys.lock);
      await eventually(() => signal.aborted, 5_000);
      expect(signal.reason).toBeInstanceOf(LockLostError);
      expect((signal.reason as LockLostError).reason).toBe('not-owner');
      expect((signal.reason as LockLostError).key).toBe('stolen');
    });
    expect(events.map((e) => e.key)).toContain('stolen');
    expect(quietLogger.warnings.some((w) => w.includes('"stolen"'))).toBe(true);
  });

  afterEach(() => jest.restoreAllMocks()); // a failed test leaves no cut-off behind

  // Every command of this client fails as on a dropped connection until `mockRestore()`.
  const cutOff = () =>
    jest
      .spyOn(client.redis, 'sendCommand')
      .mockImplementation(() => Promise.reject(new Error('Connection is closed.')) as never);

  it('a release that cannot reach Redis for longer than operationTimeout stops the renewals, says pending, and is sent again until it lands', async () => {
    const watched = client.locks.getLock('failed-release');
    const handle = await watched.lock();
    let send = cutOff();
    const started = Date.now();
    expect(await handle.release()).toBe('pending');
    expect(Date.now() - started).toBeGreaterThanOrEqual(DEFAULT_OPERATION_TIMEOUT - 50); // it tried that long
    expect(engineOf(client.locks).watchdog.size).toBe(0); // nobody keeps a lock alive that its holder gave up
    send.mockRestore();
    await eventually(async () => !(await watched.isLocked()), 5_000);

    // With a minute-long lease only the retried release can have removed it.
    const leased = client.locks.getLock('failed-release-leased');
    const leasedHandle = await leased.lock({ leaseTime: 60_000 });
    send = cutOff();
    expect(await leasedHandle.release()).toBe('pending');
    send.mockRestore();
    await eventually(async () => !(await leased.isLocked()), 5_000);
    await eventually(() => client.locks.heldLockCount === 0, 5_000);
  });

  it('a release that cannot reach Redis for a moment (a reconnect) is sent again and says released', async () => {
    const lock = client.locks.getLock('failed-release-briefly');
    const handle = await lock.lock({ leaseTime: 60_000 });
    const send = cutOff();
    setTimeout(() => send.mockRestore(), 300);
    expect(await handle.release()).toBe('released');
    expect(await lock.isLocked()).toBe(false);
    expect(client.locks.heldLockCount).toBe(0);
  });

  it('extend() renews now and throws LockLostError once the lock is gone', async () => {
    const lock = client.locks.getLock('extend');
    const handle = await lock.lock({ leaseTime: 500 });
    await handle.extend(5_000);
    expect(await client.redis.pttl(lock.keys.lock)).toBeGreaterThan(4_000);
    await sleep(700);
    expect(handle.isLost).toBe(false); // the new lease re-armed the expiry timer
    await client.redis.del(lock.keys.lock);
    await expect(handle.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(handle.signal.aborted).toBe(true);
  });

  it('close() stops renewing and releases what the client still held', async () => {
    const redis = connect();
    const locks = new LockClient({ redis, keyPrefix: prefix, watchdogTimeout, logger: quietLogger });
    const lock = locks.getLock('closing');
    const explicit = locks.getLock('closing-explicit');
    await lock.lock();
    await explicit.lock({ owner: 'explicit-owner' });
    await explicit.lock({ owner: 'explicit-owner' }); // re-entered: both holds go
    expect(engineOf(locks).watchdog.size).toBe(2);
    await locks.close();
    expect(engineOf(locks).watchdog.size).toBe(0);
    expect(await client.redis.exists(lock.keys.lock, explicit.keys.lock)).toBe(0);
    await redis.quit();
  });
});
