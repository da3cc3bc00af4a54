import { randomUUID } from 'node:crypto';
import { createLockClient, type LockClient, type LockHandle } from '../../lib';
import { eventually, lockClient, sleep, testPrefix, watchCommands, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { engineOf } from '../../lib/internal';
import { PermitLock } from '../../lib/engine/kinds/permit-lock';
import { PermitReleases } from '../../lib/engine/kinds/permit-releases';
import { SEMAPHORE_ACQUIRE } from '../../lib/engine/scripts/catalog';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import type { Grant } from '../../lib/engine/lock/lock-base';

type UnknownClaim = (holder: string, holdId: string, leaseMs: number) => Promise<Grant | undefined>;
import { killAll, startTogether, startWorker, type Worker } from '../support/workers';

const ACCEPTANCE = 1_000;

/**
 * A release hands its permits straight to the longest-waiting acquisition that fits, and the message
 * alone is the grant (see PermitLock): what the holder believes, what a dead or late addressee costs.
 */
describe('Semaphore: permits handed over in the release message', () => {
  const prefix = testPrefix();
  let holder: TestClient;
  let waiter: TestClient;
  let name: string;
  let topology: RunningTopology | undefined;

  beforeAll(async () => {
    // A server of its own: a test here pauses every write (CLIENT PAUSE), which the suites running
    // meanwhile on the shared one would feel as an outage.
    topology = await startTopology('single', { basePort: PRIVATE_PORTS.semaphoreHandOver.base });
    const { port } = topology.masters[0];
    holder = lockClient({ keyPrefix: prefix, port });
    waiter = lockClient({ keyPrefix: prefix, port });
    // Each client waits once and is handed a permit once: its subscriber is connected, and it knows its
    // master has no replica (replica sync would otherwise wait, so a hand-over is taken by a call).
    for (const [a, b] of [
      [holder, waiter],
      [waiter, holder],
    ]) {
      const held = await a.locks.getSemaphore('warm-up', { permits: 1 }).acquire();
      const waiting = b.locks.getSemaphore('warm-up', { permits: 1 }).acquire();
      await sleep(200);
      await held.release();
      await (await waiting).release();
    }
  }, 60_000);
  beforeEach(() => (name = `hand-${Math.random().toString(36).slice(2)}`));
  afterAll(async () => {
    await holder?.close();
    await waiter?.close();
    if (topology) await stopTopology(topology);
  }, 30_000);

  it('the waiter holds from the message, with no call of its own; Redis keeps it for the acceptance lease until the holder renews it itself at half of it', async () => {
    const semaphore = holder.locks.getSemaphore(name, { permits: 1 });
    const theirs = waiter.locks.getSemaphore(name, { permits: 1 });
    const held = await semaphore.acquire();
    const sent: string[] = [];
    // Attempts answered: the waiter's only scripts on the holds until the release (it releases nothing).
    let answered = 0;
    const stop = watchCommands(waiter, (command, reply) => {
      sent.push(command.name);
      if (/^eval/.test(command.name) && command.args[2] === semaphore.keys.holds)
        void reply.then(
          () => answered++,
          (error: Error) => !/^NOSCRIPT/.test(error.message) && answered++, // sent again as EVAL
        );
    });
    try {
      const waiting = theirs.acquire();
      await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === 1);
      // Subscribed, and its attempt after subscribing refused too: from now on it sends nothing.
      await eventually(() => answered >= 2);
      sent.length = 0;
      await held.release();
      const handle = await waiting;
      // The message was the grant. (INFO: the client's replica count, read again in the background.)
      expect(sent.filter((command) => command !== 'info')).toEqual([]);
      const member = handle.owner;
      const [seconds, micros] = await holder.redis.time();
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const first = Number(await holder.redis.zscore(semaphore.keys.holds, member)) - now;
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThanOrEqual(ACCEPTANCE);
      // Renewed by itself at half of the acceptance lease, to the watchdog's lease.
      await sleep(ACCEPTANCE * 0.75);
      expect(sent.filter((command) => command === 'evalsha')).toHaveLength(1); // (then EVAL once: first use here)
      const [s2, m2] = await holder.redis.time();
      const renewed =
        Number(await holder.redis.zscore(semaphore.keys.holds, member)) -
        (Number(s2) * 1000 + Math.floor(Number(m2) / 1000));
      expect(renewed).toBeGreaterThan(10_000);
      expect(handle.signal.aborted).toBe(false);
      await sleep(ACCEPTANCE);
      expect(handle.signal.aborted).toBe(false); // past the first lease: its renewal landed
      expect(await handle.release()).toBe('released');
    } finally {
      stop();
    }
  });

  it('a holder whose own renewal cannot land believes no longer than the acceptance lease: reported lost at its end, and Redis frees the permit then', async () => {
    const semaphore = holder.locks.getSemaphore(name, { permits: 1 });
    const theirs = waiter.locks.getSemaphore(name, { permits: 1 });
    const held = await semaphore.acquire();
    const waiting = theirs.acquire();
    await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === 1);
    await held.release();
    const handle = await waiting;
    const grantedAt = Date.now();
    // Every write of every client waits (the waiter's renewal too) until the acceptance lease is over.
    await holder.redis.call('CLIENT', 'PAUSE', String(ACCEPTANCE + 500), 'WRITE');
    await new Promise<void>((resolve) => handle.signal.addEventListener('abort', () => resolve()));
    const lostAfter = Date.now() - grantedAt;
    expect(lostAfter).toBeLessThanOrEqual(ACCEPTANCE + 250); // (a timer runs late on a loaded machine)
    expect(lostAfter).toBeGreaterThan(ACCEPTANCE / 2);
    await eventually(async () => (await semaphore.availablePermits()) === 1, 5_000);
  });

  it('a wait that ends while permits are handed to it gives them back at once, not after the acceptance lease', async () => {
    const semaphore = holder.locks.getSemaphore(name, { permits: 1 });
    const theirs = waiter.locks.getSemaphore(name, { permits: 1 });
    const held = await semaphore.acquire();
    const controller = new AbortController();
    const waiting = theirs.acquire({ signal: controller.signal });
    waiting.catch(() => undefined);
    await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === 1);
    const released = held.release();
    controller.abort(new Error('gave up'));
    await released;
    await expect(waiting).rejects.toThrow('gave up');
    const gaveUpAt = Date.now();
    await eventually(async () => (await semaphore.availablePermits()) === 1, 5_000, 10);
    expect(Date.now() - gaveUpAt).toBeLessThan(ACCEPTANCE / 2);
    expect(await holder.redis.zcard(semaphore.keys.waiting)).toBe(0);
  });

  it('a wait that timed out leaves the queue: the next release hands nothing to it', async () => {
    const semaphore = holder.locks.getSemaphore(name, { permits: 1 });
    const theirs = waiter.locks.getSemaphore(name, { permits: 1 });
    const held = await semaphore.acquire();
    expect(await theirs.tryAcquire({ waitTime: 200 })).toBeNull();
    expect(await holder.redis.zcard(semaphore.keys.waiting)).toBe(0);
    await held.release();
    expect(await semaphore.availablePermits()).toBe(1);
  });

  it('an attempt whose reply never came is claimed with its own lease: not the acceptance lease of a hand-over to it, nor a lease that ended', async () => {
    const semaphore = holder.locks.getSemaphore(name, { permits: 1 });
    const { keys } = semaphore;
    const timings = { acceptanceLease: ACCEPTANCE, staleWaiterTimeout: 5_000 };
    const lock = new PermitLock(
      engineOf(waiter.locks),
      name,
      keys,
      1,
      1,
      undefined,
      timings,
      new PermitReleases(engineOf(waiter.locks), keys, 1, ACCEPTANCE),
    );
    /** What LockAcquisition asks before its next attempt when the last one's reply never came. */
    const claim = (member: string, leaseMs: number) =>
      (lock as unknown as { grantOfUnknownAttempt: UnknownClaim }).grantOfUnknownAttempt(member, 'unused', leaseMs);
    const remaining = async (member: string) => {
      const [seconds, micros] = await holder.redis.time();
      const score = await holder.redis.zscore(keys.holds, member);
      return Number(score) - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000));
    };
    const held = await semaphore.acquire();
    // The wait's attempt queued it; its next attempt's reply was lost; then the release handed it the
    // permit (recorded with the acceptance lease; the message is the grant).
    const member = `1:o:${randomUUID()}`;
    const client = engineOf(waiter.locks).clientId;
    const listener = holder.redis.duplicate();
    await listener.subscribe(`${keys.channel}:${client}`); // someone listens: the hand-over is made
    try {
      const queued = await SEMAPHORE_ACQUIRE.run(holder.redis, keys, {
        member,
        permits: 1,
        leaseMs: 30_000,
        configuredLimit: 1,
        publish: 'publish',
        clientId: client,
        mode: 'wait',
        idleKeyTtl: IDLE_KEY_TTL,
        acceptanceLease: ACCEPTANCE,
        staleWaiterTimeout: 5_000,
      });
      expect(queued[0]).toBe('refused');
      expect(await held.release()).toBe('released');
      expect(await remaining(member)).toBeLessThanOrEqual(ACCEPTANCE);
      // The claim says it holds, and the caller then believes the attempt's 30 s lease from when it was
      // sent: Redis must keep it that long too, or the permit is reclaimed after the acceptance lease
      // and granted again while this holder still believes it holds it.
      expect(await claim(member, 30_000)).toBeDefined();
      expect(await remaining(member)).toBeGreaterThan(20_000);
      expect(await holder.redis.zscore(keys.holds, member)).not.toBeNull();
      await holder.redis.zrem(keys.holds, member);
      // A hold whose lease ended (no script reclaimed it yet) is not claimed.
      const stale = `1:o:${randomUUID()}`;
      const [seconds] = await holder.redis.time();
      await holder.redis.zadd(keys.holds, Number(seconds) * 1000 - 1_000, stale);
      expect(await claim(stale, 30_000)).toBeUndefined();
    } finally {
      await listener.quit();
    }
  });

  it('waiters are served in the order they came, each with the permits it asked for, all or nothing', async () => {
    // A long acceptance lease: a loaded machine's stall must not let a hand-over run out (and go on to
    // the next waiter) before its waiter took it.
    const options = { permits: 3, acceptanceLease: 20_000 };
    const semaphore = holder.locks.getSemaphore(name, options);
    const theirs = waiter.locks.getSemaphore(name, options);
    const all = await semaphore.acquire({ permits: 3 });
    const order: string[] = [];
    const starts: [string, () => Promise<LockHandle>][] = [
      ['2', () => theirs.acquire({ permits: 2 })],
      ['1a', () => semaphore.acquire({ permits: 1 })],
      ['1b', () => theirs.acquire({ permits: 1 })],
    ];
    const waits: Promise<LockHandle>[] = [];
    // Queued one after the other: each wait starts once the one before is in the queue (a wait queues
    // once its client listens, so started together they could queue in any order).
    for (const [label, start] of starts) {
      waits.push(start().then((h) => (order.push(label), h)));
      await eventually(async () => (await holder.redis.zcard(semaphore.keys.waiting)) === waits.length);
    }
    await all.release();
    const handles = await Promise.all(waits.slice(0, 2));
    expect(order.sort()).toEqual(['1a', '2']); // one release handed over to both
    expect(await semaphore.availablePermits()).toBe(0);
    await sleep(100);
    expect(order).toHaveLength(2); // the third waited: nothing was left for it
    await handles[0].release();
    const last = await waits[2];
    expect(order[2]).toBe('1b');
    await Promise.all([handles[1], last].map((h) => h.release()));
    expect(await semaphore.availablePermits()).toBe(3);
  });
});

describe('Semaphore hand-overs across OS processes', () => {
  const { port } = sharedTopology('single').masters[0];
  const connection = { type: 'single' as const, host: '127.0.0.1', port };
  const prefix = `sh-${randomUUID().slice(0, 8)}`;
  const base = { CONNECTION: JSON.stringify(connection), KEY_PREFIX: prefix };
  let locks: LockClient;
  const workers: Worker[] = [];

  beforeAll(async () => {
    locks = await createLockClient({ connection, keyPrefix: prefix, logger: { warn: () => {}, error: () => {} } });
  });
  afterEach(() => killAll(workers.splice(0)));
  afterAll(() => locks.close());

  it('6 processes of 2 loops each on a semaphore of 1: one holder at a time, zero lost updates', async () => {
    const counterKey = `${prefix}:inside`;
    const racyKey = `${prefix}:racy`;
    const env = {
      ...base,
      SEMAPHORE_NAME: 'one',
      PERMITS: 1,
      COUNTER_KEY: counterKey,
      RACY_KEY: racyKey,
      LOOPS: 2,
      START_AT: 'signal',
      DURATION_MS: 3_000,
    };
    const racers = Array.from({ length: 6 }, () => startWorker('semaphore-racer.ts', env));
    workers.push(...racers);
    await startTogether(racers);
    const results = (await Promise.all(racers.map((w) => w.result))) as { entries: number; maxInside: number }[];
    expect(Math.max(...results.map((r) => r.maxInside))).toBe(1);
    const entries = results.reduce((sum, r) => sum + r.entries, 0);
    expect(entries).toBeGreaterThan(20);
    expect(Number(await locks.redis.get(racyKey))).toBe(entries);
    expect(await locks.getSemaphore('one', { permits: 1 }).availablePermits()).toBe(1);
  }, 90_000);

  it('a waiter frozen (SIGSTOP) when the permit is handed to it costs the next one about the acceptance lease; thawed, the late message grants it nothing', async () => {
    const semaphore = locks.getSemaphore('frozen', { permits: 1 });
    const env = { ...base, SEMAPHORE_NAME: 'frozen', PERMITS: 1 };
    const held = await semaphore.acquire();
    const frozen = startWorker('wait-permits.ts', env);
    workers.push(frozen);
    await frozen.waitFor('waiting');
    await eventually(async () => (await locks.redis.zcard(semaphore.keys.waiting)) === 1);
    await eventually(async () => (await locks.redis.pubsub('CHANNELS', `${semaphore.keys.channel}:*`)).length === 1);
    const next = locks.getSemaphore('frozen', { permits: 1 }).acquire();
    await eventually(async () => (await locks.redis.zcard(semaphore.keys.waiting)) === 2);
    frozen.child.kill('SIGSTOP');
    try {
      const releasedAt = Date.now();
      await held.release();
      const handle = await next;
      const waited = Date.now() - releasedAt;
      // The acceptance lease, then at most a third of the queue's stale-waiter timeout until a re-check.
      expect(waited).toBeGreaterThanOrEqual(ACCEPTANCE - 100);
      expect(waited).toBeLessThan(ACCEPTANCE + 5_000 / 3 + 1_000);
      frozen.child.kill('SIGCONT');
      await sleep(500);
      expect(frozen.describe()).not.toContain('acquired'); // the late message granted nothing
      await handle.release();
      await frozen.waitFor('acquired');
    } finally {
      frozen.child.kill('SIGCONT');
    }
  }, 30_000);

  it('a holder frozen (SIGSTOP) right after a hand-over loses the permit after about the acceptance lease, not its whole lease', async () => {
    // A worker slowed past half the acceptance lease before the SIGSTOP renewed its permit (or accepted a
    // late message by a call) for the watchdog's 30 s: not this case. It is then killed and the case set up
    // again on another name (at most three times; the check of the lease says if it never went by message).
    const frozenRightAfterHandOver = async (tries: number) => {
      const semaphoreName = `frozen-holder-${tries}`;
      const semaphore = locks.getSemaphore(semaphoreName, { permits: 1 });
      const held = await semaphore.acquire();
      const worker = startWorker('wait-permits.ts', { ...base, SEMAPHORE_NAME: semaphoreName, PERMITS: 1 });
      workers.push(worker);
      await worker.waitFor('waiting');
      await eventually(async () => (await locks.redis.zcard(semaphore.keys.waiting)) === 1);
      await eventually(async () => (await locks.redis.pubsub('CHANNELS', `${semaphore.keys.channel}:*`)).length === 1);
      await held.release();
      await worker.waitFor('acquired');
      worker.child.kill('SIGSTOP');
      const frozenAt = Date.now();
      const [, expiresAt] = await locks.redis.zrange(semaphore.keys.holds, 0, 0, 'WITHSCORES');
      const [seconds, micros] = await locks.redis.time();
      const leaseLeft = Number(expiresAt) - (Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000));
      return { semaphore, worker, frozenAt, leaseLeft };
    };
    let setUp = await frozenRightAfterHandOver(1);
    for (let tries = 2; tries <= 3 && setUp.leaseLeft > ACCEPTANCE; tries++) {
      setUp.worker.child.kill('SIGKILL');
      setUp = await frozenRightAfterHandOver(tries);
    }
    const { semaphore, worker, frozenAt, leaseLeft } = setUp;
    try {
      expect(leaseLeft).toBeLessThanOrEqual(ACCEPTANCE);
      const handle = await semaphore.acquire({ waitTime: 20_000 });
      const waited = Date.now() - frozenAt;
      expect(waited).toBeLessThan(ACCEPTANCE + 5_000 / 3 + 1_000); // not the watchdog's 30 s
      worker.child.kill('SIGCONT');
      await worker.waitFor('lost'); // thawed, it learns it lost the permit
      await handle.release();
    } finally {
      worker.child.kill('SIGCONT');
    }
  }, 30_000);

  it('a waiter killed (SIGKILL) costs nothing: nobody listens for it, so the release hands its permit to the next', async () => {
    const semaphore = locks.getSemaphore('killed-waiter', { permits: 1 });
    const env = { ...base, SEMAPHORE_NAME: 'killed-waiter', PERMITS: 1 };
    const held = await semaphore.acquire();
    const doomed = startWorker('wait-permits.ts', env);
    workers.push(doomed);
    await doomed.waitFor('waiting');
    await eventually(async () => (await locks.redis.zcard(semaphore.keys.waiting)) === 1);
    await eventually(async () => (await locks.redis.pubsub('CHANNELS', `${semaphore.keys.channel}:*`)).length === 1);
    const next = locks.getSemaphore('killed-waiter', { permits: 1 }).acquire();
    await eventually(async () => (await locks.redis.zcard(semaphore.keys.waiting)) === 2);
    doomed.child.kill('SIGKILL');
    await new Promise((resolve) => doomed.child.once('exit', resolve));
    await sleep(200); // its connections closed on the server's side
    const releasedAt = Date.now();
    await held.release();
    const handle = await next;
    expect(Date.now() - releasedAt).toBeLessThan(ACCEPTANCE / 2);
    await handle.release();
  }, 30_000);
});
