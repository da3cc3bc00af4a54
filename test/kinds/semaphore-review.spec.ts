import { randomUUID } from 'node:crypto';
import { createLockClient, type LockClient, type LockHandle } from '../../lib';
import { engineOf } from '../../lib/internal';
import { PermitLock } from '../../lib/engine/kinds/permit-lock';
import { PermitReleases } from '../../lib/engine/kinds/permit-releases';
import { SEMAPHORE_ACQUIRE } from '../../lib/engine/scripts/catalog';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import type { Grant } from '../../lib/engine/lock/lock-base';
import { eventually, lockClient, quietLogger, sleep, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';

type UnknownClaim = (holder: string, holdId: string, leaseMs: number) => Promise<Grant | undefined>;

/**
 * Paths of the semaphore the happy tests do not take (a review): a client closed while it waits, two
 * clients with one client id, the fencing tokens of hand-overs and lost replies, a lease shorter than
 * the acceptance lease, an extension racing its own release.
 */
describe('Semaphore review', () => {
  const prefix = testPrefix();
  let other: TestClient;
  let name: string;
  const open: TestClient[] = [];

  beforeAll(() => {
    other = lockClient({ keyPrefix: prefix });
  });
  beforeEach(() => (name = `rev-${Math.random().toString(36).slice(2)}`));
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  afterAll(() => other.close());

  it('a wait still running when its client is closed takes no permit afterwards (the ioredis client passed in stays open)', async () => {
    // The client's own redis is the application's: close() leaves it open.
    const closing = lockClient({ keyPrefix: prefix, watchdogTimeout: 1_500 });
    open.push(closing);
    const options = { permits: 1, staleWaiterTimeout: 600 }; // the waiter retries every 200 ms
    const semaphore = other.locks.getSemaphore(name, options);
    const held = await semaphore.acquire({ leaseTime: 30_000 });
    const waiting = closing.locks.getSemaphore(name, options).acquire();
    const outcome = waiting.then(
      () => 'acquired',
      (error: Error) => error.name,
    );
    await eventually(async () => (await other.redis.zcard(semaphore.keys.waiting)) === 1);
    await closing.locks.close();
    expect(await held.release()).toBe('released');
    // Past a few of the waiter's retries and of the closed client's watchdog ticks.
    await sleep(4_000); // the closed client's watchdog lease (1.5 s) over twice
    expect(await Promise.race([outcome, sleep(0).then(() => 'still waiting')])).toBe('LockError');
    expect(await semaphore.availablePermits()).toBe(1);
    expect(await other.redis.zcard(semaphore.keys.waiting)).toBe(0); // and it left the queue
  });
});

describe('Semaphore review: two clients that share a clientId (two processes configured alike)', () => {
  const prefix = testPrefix();
  const open: TestClient[] = [];
  afterAll(() => Promise.all(open.map((c) => c.close())));

  it("a hand-over to one client's wait is not given back by the other: one permit, one holder", async () => {
    // A long operationTimeout: a release is remembered that long, and a wait whose permits were given
    // back is refused until then (so a give-back shows as a wait far longer than the one asserted).
    const [holder, first, second] = [{}, { clientId: 'shared' }, { clientId: 'shared' }].map((o) => {
      const client = lockClient({ keyPrefix: prefix, operationTimeout: 20_000, ...o });
      open.push(client);
      return client;
    });
    const name = `shared-${Math.random().toString(36).slice(2)}`;
    const options = { permits: 1, acceptanceLease: 3_000 };
    const semaphore = holder.locks.getSemaphore(name, options);
    const held = await semaphore.acquire();
    // One wait in each client, queued one after the other: both listen on the clientId's channel.
    const waits: Promise<LockHandle>[] = [];
    for (const client of [first, second]) {
      const waiting = client.locks.getSemaphore(name, options).acquire({ waitTime: 30_000 });
      waiting.catch(() => undefined);
      waits.push(waiting);
      await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === waits.length);
    }
    await sleep(300); // both subscribed, and refused again since
    await held.release();
    const firstHandle = await Promise.race([waits[0], sleep(8_000).then(() => undefined)]);
    expect(firstHandle).toBeDefined(); // the permit is the first wait's, at once
    // ... and only its: the second one still waits.
    const secondState = await Promise.race([waits[1].then(() => 'granted'), sleep(1_000).then(() => 'waiting')]);
    expect(secondState).toBe('waiting');
    expect(firstHandle!.signal.aborted).toBe(false);
    expect(await holder.redis.zscore(semaphore.keys.holds, firstHandle!.owner)).not.toBeNull();
    await firstHandle!.release();
    await (await waits[1]).release();
    expect(await semaphore.availablePermits()).toBe(1);
  }, 60_000);
});

describe('Semaphore review: fencing tokens of permits handed over and taken by a call (Cluster: a message alone never vouches)', () => {
  const prefix = testPrefix();
  const open: LockClient[] = [];
  afterAll(() => Promise.all(open.map((c) => c.close())));

  it('two waits handed permits by one release each get a token of their own, above the releasing holder’s', async () => {
    const connection = { type: 'cluster' as const, nodes: sharedTopology('cluster').masters };
    const [holder, a, b] = await Promise.all(
      [1, 2, 3].map(() => createLockClient({ connection, keyPrefix: prefix, logger: quietLogger })),
    );
    open.push(holder, a, b);
    const name = `tokens-${Math.random().toString(36).slice(2)}`;
    const options = { permits: 2, acceptanceLease: 5_000 };
    const semaphore = holder.getSemaphore(name, options);
    const held = await semaphore.acquire({ permits: 2 });
    const waits: Promise<LockHandle>[] = [];
    for (const client of [a, b]) {
      waits.push(client.getSemaphore(name, options).acquire({ waitTime: 20_000 }));
      await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === waits.length);
    }
    await sleep(300); // both subscribed, and refused again since
    await held.release();
    const handles = await Promise.all(waits);
    const tokens = handles.map((h) => h.fencingToken);
    expect(tokens[0]).not.toBe(tokens[1]);
    for (const token of tokens) expect(token).toBeGreaterThan(held.fencingToken);
    await Promise.all(handles.map((h) => h.release()));
  });
});

describe('Semaphore review: the token of an attempt whose reply never came', () => {
  const prefix = testPrefix();
  let client: TestClient;
  beforeAll(() => (client = lockClient({ keyPrefix: prefix })));
  afterAll(() => client.close());

  it('a hold claimed after a lost reply gets a token of its own, not that of a hold granted since', async () => {
    const name = `claim-${Math.random().toString(36).slice(2)}`;
    const semaphore = client.locks.getSemaphore(name, { permits: 2 });
    const { keys } = semaphore;
    const engine = engineOf(client.locks);
    const timings = { acceptanceLease: 5_000, staleWaiterTimeout: 5_000 };
    const lock = new PermitLock(
      engine,
      name,
      keys,
      1,
      2,
      undefined,
      timings,
      new PermitReleases(engine, keys, 2, 5_000),
    );
    /** What LockAcquisition asks before its next attempt when the last one's reply never came. */
    const claim = (member: string) =>
      (lock as unknown as { grantOfUnknownAttempt: UnknownClaim }).grantOfUnknownAttempt(member, 'unused', 30_000);
    const held = await semaphore.acquire({ permits: 2 });
    // A wait's attempt queued the member; its next attempt's reply was lost; then the release handed it
    // the permit (the message is the grant), and a newcomer took the other permit.
    const member = `1:o:${randomUUID()}`;
    const listener = client.redis.duplicate();
    await listener.subscribe(`${keys.channel}:${engine.clientId}`); // someone listens: the hand-over is made
    try {
      const queued = await SEMAPHORE_ACQUIRE.run(client.redis, keys, {
        member,
        permits: 1,
        leaseMs: 30_000,
        configuredLimit: 2,
        publish: 'publish',
        clientId: engine.clientId,
        mode: 'wait',
        idleKeyTtl: IDLE_KEY_TTL,
        acceptanceLease: 5_000,
        staleWaiterTimeout: 5_000,
      });
      expect(queued[0]).toBe('refused');
      await held.release();
      const newcomer = await semaphore.acquire();
      const grant = await claim(member);
      expect(grant).toBeDefined();
      expect(grant!.fencingToken).not.toBe(newcomer.fencingToken);
      expect(grant!.fencingToken).toBeGreaterThan(held.fencingToken);
      await newcomer.release();
    } finally {
      await listener.quit();
    }
  });
});

describe('Semaphore review: a lease of its own shorter than the acceptance lease', () => {
  const prefix = testPrefix();
  const open: TestClient[] = [];
  afterAll(() => Promise.all(open.map((c) => c.close())));

  it('permits handed to a wait with a short lease are kept in Redis no longer than that lease', async () => {
    const [holder, waiter] = [1, 2].map(() => {
      const client = lockClient({ keyPrefix: prefix });
      open.push(client);
      return client;
    });
    const name = `short-${Math.random().toString(36).slice(2)}`;
    const options = { permits: 1, acceptanceLease: 20_000 };
    const semaphore = holder.locks.getSemaphore(name, options);
    const held = await semaphore.acquire();
    const waiting = waiter.locks.getSemaphore(name, options).acquire({ leaseTime: 2_000, waitTime: 20_000 });
    await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === 1);
    await sleep(300); // subscribed, and refused again since
    await held.release();
    const handle = await waiting;
    const [seconds, micros] = await holder.redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const leaseLeft = Number(await holder.redis.zscore(semaphore.keys.holds, handle.owner)) - now;
    // What the holder asked for, not the acceptance lease of the hand-over (20 s).
    expect(leaseLeft).toBeLessThanOrEqual(2_000);
    await handle.release();
  });
});

describe('Semaphore review: extend() and release() at once, on a master with a replica (extend waits for it)', () => {
  const prefix = testPrefix();
  const open: LockClient[] = [];
  afterAll(() => Promise.all(open.map((c) => c.close())));

  it('a hold released while its extension waited for the replica is not reported lost afterwards', async () => {
    const [master] = sharedTopology('replica').masters;
    const locks = await createLockClient({
      connection: { type: 'single', host: master.host, port: master.port },
      keyPrefix: prefix,
      logger: quietLogger,
    });
    open.push(locks);
    const lost: unknown[] = [];
    locks.on('lockLost', (error) => lost.push(error));
    const semaphore = locks.getSemaphore(`extend-${Math.random().toString(36).slice(2)}`, { permits: 1 });
    const handle = await semaphore.acquire({ leaseTime: 5_000 });
    const extended = handle.extend(1_000).then(
      () => 'extended',
      (error: Error) => error.name,
    );
    expect(await handle.release()).toBe('released');
    await extended;
    await sleep(1_500); // past the extended lease
    expect({ lost: lost.length, aborted: handle.signal.aborted }).toEqual({ lost: 0, aborted: false });
  });
});

describe('Semaphore review: the limit setPermits stored outlives every hold (a short idleKeyTtl)', () => {
  const prefix = testPrefix();
  const open: TestClient[] = [];
  afterAll(() => Promise.all(open.map((c) => c.close())));

  it.each([
    ['a wait whose lease is shorter than the acceptance lease (its hold claimed by a call)', 5_000],
    ['a watched wait (the message believed, renewed at half of the acceptance lease)', undefined],
  ])(
    '%s: permits handed over are counted against the stored limit, not the configured one',
    async (_what, leaseTime) => {
      const [holder, waiter, newcomer] = [1, 2, 3].map(() => {
        const client = lockClient({ keyPrefix: prefix, idleKeyTtl: 100 });
        open.push(client);
        return client;
      });
      const name = `limit-${Math.random().toString(36).slice(2)}`;
      const options = { permits: 2, acceptanceLease: 10_000 };
      const semaphore = holder.locks.getSemaphore(name, options);
      const held = await semaphore.acquire({ leaseTime: 300 });
      await semaphore.setPermits(1); // stored for the 300 ms lease and the 100 ms idleKeyTtl
      const waiting = waiter.locks.getSemaphore(name, options).acquire({ leaseTime, waitTime: 20_000 });
      await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === 1);
      await held.release();
      const handle = await waiting;
      await sleep(800); // past what the limit was first stored for
      const other = await newcomer.locks.getSemaphore(name, options).tryAcquire();
      const believes = !handle.signal.aborted;
      await other?.release();
      expect({ believes, newcomerGranted: other !== null }).toEqual({ believes: true, newcomerGranted: false });
      await handle.release();
    },
  );
});
