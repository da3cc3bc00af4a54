import { loadedScript } from '../../lib/engine/scripts/loader';
import {
  CLAIM_ATTEMPT,
  FAIR_ABANDON,
  FAIR_ACCEPT,
  FAIR_LOCK,
  FAIR_UNLOCK,
  RENEW_MANY,
} from '../../lib/engine/scripts/catalog';
import { monotonicNow } from '../../lib/engine/util/clock';
import type { HeldLock } from '../../lib/engine/holds/held-lock';
import { engineOf, lockKeys, runInLockScope, type LockHandle } from '../../lib/internal';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import {
  connect,
  eventually,
  lockClient,
  singlePort,
  sleep,
  testPrefix,
  watchCommands,
  type TestClient,
} from '../support/engine';
import { killAll, raceCounter, startWorker, type Worker } from '../support/workers';

/**
 * Issue 43: the fair lock's hand-over travels in its message. The releasing script records the hold
 * under the id the next wait registered and gives it the acceptance lease; the message alone tells the
 * wait it holds, and the holder believes only that short lease (counted from a server clock anchor)
 * until its own renewal, at half of it, lands.
 */
describe('FairLock: the grant travels in the hand-over message', () => {
  const prefix = testPrefix();
  // Long enough that a worker process slowed down by a busy machine still reads its grant in the message
  // while the first lease has more than half to run (a later message is accepted instead).
  const acceptanceLease = 4_000;
  const options = { staleWaiterTimeout: 1_500, acceptanceLease };
  /** How long a worker process may take to start and queue on a busy machine. */
  const WORKER_START_MS = 45_000;
  const workers: Worker[] = [];
  let a: TestClient;
  let b: TestClient;
  let name: string;

  beforeAll(() => {
    a = lockClient({ keyPrefix: prefix });
    b = lockClient({ keyPrefix: prefix });
  });
  beforeEach(() => (name = `grant-${Math.random().toString(36).slice(2)}`));
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  const keysOf = () => a.locks.getFairLock(name, options).keys;
  const queueLength = () => a.redis.llen(keysOf().queue);
  /**
   * The other processes listening for this lock's hand-overs (a worker's). This process's own channel is
   * left out: after a wait of its own it lingers, and counted for the worker's it let a hand-over go to a
   * worker not listening yet (passed by, to this process's wait).
   */
  const workerChannels = async () => {
    const ours = [a, b].map((c) => `${keysOf().channel}:${c.locks.clientId}`);
    const channels = (await a.redis.pubsub('CHANNELS', `${keysOf().channel}:*`)) as string[];
    return channels.filter((channel) => !ours.includes(channel)).length;
  };
  const heldOf = (handle: LockHandle) => (handle as unknown as { held: HeldLock }).held;
  const workerEnv = (extra: Record<string, string | number> = {}) => ({
    REDIS_PORT: singlePort(),
    KEY_PREFIX: prefix,
    LOCK_NAME: name,
    LOCK_KIND: 'fair',
    STALE_MS: options.staleWaiterTimeout,
    ACCEPT_MS: acceptanceLease,
    // The master has no replica: nothing for replica sync to wait for (a fresh client's 'auto' does not
    // know that before its first grant, and accepts that one).
    REPLICA_SYNC: 'off',
    ...extra,
  });
  const start = (file: string, extra?: Record<string, string | number>) => {
    const worker = startWorker(file, workerEnv(extra));
    workers.push(worker);
    return worker;
  };

  it('the waiter runs on the message alone, believing only the acceptance lease, and renews itself at half of it', async () => {
    const lockA = a.locks.getFairLock(name, options);
    const lockB = b.locks.getFairLock(name, options);
    // b learns that its master has no replica (replicaSync 'auto'): a count read before the connection
    // was ready is read again.
    await eventually(() => !engineOf(b.locks).replicaSync.waitsAfterGrant(lockB.keys.lock));
    const holder = await lockA.lock();
    const waiting = runInLockScope(() => lockB.lock(), { newScope: true }); // the watchdog's 30 s lease
    waiting.catch(() => undefined); // awaited below; a failed check before must not leave it unobserved
    await eventually(async () => (await queueLength()) === 1);
    const channel = `${lockB.keys.channel}:${b.locks.clientId}`;
    await eventually(async () => (await a.redis.pubsub('NUMSUB', channel))[1] === 1);
    await sleep(200); // its attempt after subscribing is answered: it sleeps until a message
    const sent: string[] = [];
    const accept = loadedScript(FAIR_ACCEPT.file).sha;
    const stop = watchCommands(b, (command) => {
      // A replica count read in the background (replicaSync 'auto' keeps it fresh) delays no grant.
      if (command.name !== 'info') sent.push(command.args[0] === accept ? 'accept' : command.name);
    });
    const releasedAt = monotonicNow();
    await holder.release();
    const handle = await waiting;
    stop();
    expect(sent).toEqual([]); // no acceptance, nor any other command, before the holder's code runs
    expect(handle.fencingToken).toBe(Number(await a.redis.get(lockA.keys.fence)));
    const held = heldOf(handle);
    expect(held.expiresAt - releasedAt).toBeLessThanOrEqual(acceptanceLease);
    expect(held.expiresAt - monotonicNow()).toBeGreaterThan(acceptanceLease / 2 - 100);
    expect(await a.redis.pttl(lockA.keys.lock)).toBeLessThanOrEqual(acceptanceLease);
    // Renewed by itself at half the first lease: Redis and the holder then count the full lease.
    await eventually(async () => (await a.redis.pttl(lockA.keys.lock)) > acceptanceLease, 6_000);
    await eventually(() => held.expiresAt - monotonicNow() > 20_000, 1_000);
    await sleep(acceptanceLease * 0.6); // past the first lease's end: no loss reported
    expect(handle.signal.aborted).toBe(false);
    expect(await handle.release()).toBe('released');
    expect(await a.redis.exists(lockA.keys.lock, lockA.keys.queue, lockA.keys.waiterHolds)).toBe(0);
  });

  /**
   * A worker process queues first, then a wait of this process; this process's hold is released, and
   * the lock is handed to the worker, which prints 'acquired'.
   */
  async function handedToWorker() {
    const lock = a.locks.getFairLock(name, options);
    const holder = await lock.lock();
    const worker = start('hold-lock.ts');
    await eventually(async () => (await queueLength()) === 1, WORKER_START_MS);
    // And it listens (it queues only once it does; checked, since a hand-over nobody hears passes it by).
    await eventually(async () => (await workerChannels()) === 1, WORKER_START_MS);
    const next = runInLockScope(() => lock.lock(), { newScope: true });
    next.catch(() => undefined); // awaited by the test; a failed check before must not leave it unobserved
    await eventually(async () => (await queueLength()) === 2);
    const releasedAt = Date.now();
    await holder.release();
    await worker.waitFor('acquired');
    return { lock, worker, next, releasedAt };
  }

  /**
   * handedToWorker, then `signal` to the worker (before its renewal at half the acceptance lease). A
   * message that reached the worker with half its lease gone (a loaded machine) was accepted by a
   * command, for the whole lease, and a worker slowed past half the lease renewed it: neither is these
   * cases. The lock is then taken back from the worker and the hand-over made again (at most three
   * times; the callers' check of the lease says if it never went by message).
   */
  async function handedByMessage(signal: 'SIGSTOP' | 'SIGKILL') {
    let setUp = await handedToWorker();
    setUp.worker.child.kill(signal);
    for (let tries = 1; tries < 3 && (await a.redis.pttl(setUp.lock.keys.lock)) > acceptanceLease; tries++) {
      setUp.worker.child.kill('SIGKILL');
      await setUp.lock.forceUnlock();
      await (await setUp.next).release();
      setUp = await handedToWorker();
      setUp.worker.child.kill(signal);
    }
    return setUp;
  }

  it('a holder frozen right after the hand-over holds the next waiter up for one acceptance lease, and is told of the loss when it runs again', async () => {
    const { lock, worker: frozen, next, releasedAt } = await handedByMessage('SIGSTOP');
    try {
      expect(await a.redis.pttl(lock.keys.lock)).toBeLessThanOrEqual(acceptanceLease); // not the 30 s lease
      const handle = await next;
      // The lapse, then the waiter's next re-check (a third of staleWaiterTimeout), with slack.
      expect(Date.now() - releasedAt).toBeLessThan(acceptanceLease + options.staleWaiterTimeout / 3 + 1_500);
      expect(handle.fencingToken).toBe(Number(await a.redis.get(lock.keys.fence)));
      frozen.child.kill('SIGCONT');
      // Its first lease ended while it was frozen, and its renewal never landed: reported lost.
      await frozen.waitFor('lost', 5_000);
      expect(await a.redis.hget(lock.keys.lock, handle.owner)).toBe('1');
      await handle.release();
    } finally {
      frozen.child.kill('SIGCONT');
    }
  }, 90_000);

  it('a holder killed right after the hand-over costs the next waiter about one acceptance lease', async () => {
    const { lock, next, releasedAt } = await handedByMessage('SIGKILL');
    expect(await a.redis.pttl(lock.keys.lock)).toBeLessThanOrEqual(acceptanceLease); // not the 30 s lease
    const handle = await next;
    expect(Date.now() - releasedAt).toBeLessThan(acceptanceLease + options.staleWaiterTimeout / 3 + 1_500);
    await handle.release();
  }, 90_000);

  it('a hand-over message that comes after its acceptance lease ran out grants nothing: the late waiter queues again behind the holder', async () => {
    const lock = a.locks.getFairLock(name, options);
    const holder = await lock.lock();
    const late = start('queue-waiters.ts', { ORDER_KEY: `${prefix}:order:${name}` });
    await late.waitFor('ready', WORKER_START_MS);
    late.send('enqueue late');
    await eventually(async () => (await queueLength()) === 1);
    await eventually(async () => (await workerChannels()) === 1, WORKER_START_MS);
    const next = runInLockScope(() => lock.lock(), { newScope: true });
    next.catch(() => undefined); // awaited below; a failed check before must not leave it unobserved
    await eventually(async () => (await queueLength()) === 2);
    late.child.kill('SIGSTOP'); // its subscriber still counts for PUBLISH: the hand-over goes to it
    const order = () => a.redis.lrange(`${prefix}:order:${name}`, 0, -1);
    try {
      await holder.release();
      const handle = await next; // once the hand-over to the frozen waiter lapsed
      late.child.kill('SIGCONT'); // it reads the message now, well after the grant's lease ran out
      await sleep(1_500);
      expect(await order()).toEqual([]); // it did not run while this holder holds the lock
      expect(handle.signal.aborted).toBe(false);
      await handle.release();
      await eventually(async () => (await order()).includes('late'), 10_000);
    } finally {
      late.child.kill('SIGCONT');
    }
    late.send('finish');
    await late.result;
  }, 90_000);

  it('8 processes on a racy counter: no lost update, every grant to the head of the queue its previous holder saw', async () => {
    const keys = {
      COUNTER_KEY: `${prefix}:counter:${name}`,
      TOKENS_KEY: `${prefix}:tokens:${name}`,
      HOLDERS_KEY: `${prefix}:holders:${name}`,
      QUEUE_KEY: keysOf().queue,
    };
    // 8 s, not 4: a loaded machine once let only 50 grants through in 4 s (a hand-over that lapses holds the
    // queue up for an acceptance lease, 4 s here).
    const env = { ...workerEnv({ ...keys, DURATION_MS: 8_000 }), ...keys };
    const { increments, total } = await raceCounter(8, env, workers);
    expect(increments.every((n) => n > 0)).toBe(true);
    expect(Number(await a.redis.get(env.COUNTER_KEY))).toBe(total);
    const tokens = (await a.redis.lrange(env.TOKENS_KEY, 0, -1)).map(Number);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
    // Strict FIFO, whatever the scheduler does: each holder looked at the head of the queue while it held
    // the lock, and the next grant went to that process. (A process kept off the CPU is simply not in the
    // queue yet; it cannot be overtaken once it is.) The head is passed over only when it is taken for
    // dead: a waiter frozen past staleWaiterTimeout (1.5 s) by a loaded machine, a hand-over it did not hear
    // or that lapsed unclaimed (4 s): a few at most in 8 s. A lock that let anyone jump the queue would
    // show here at most of its grants.
    const grants = (await a.redis.lrange(env.HOLDERS_KEY, 0, -1)).map(
      (text) => JSON.parse(text) as { client: string; next: string | null },
    );
    expect(grants.length).toBe(total);
    const checked = grants.slice(0, -1).filter((grant) => grant.next !== null);
    expect(checked.length).toBeGreaterThan(total / 2); // the queue was rarely empty: 7 others wait
    const jumped = grants
      .slice(0, -1)
      .map((grant, i) => ({ at: i + 1, expected: grant.next, granted: grants[i + 1].client }))
      .filter(({ expected, granted }) => expected !== null && expected !== granted);
    expect(jumped.length).toBeLessThanOrEqual(3);
    const k = keysOf();
    expect(await a.redis.exists(k.lock, k.queue, k.deadlines, k.waiterHolds)).toBe(0);
  }, 90_000);

  describe('the scripts', () => {
    let redis: ReturnType<typeof connect>;
    let sub: ReturnType<typeof connect>;
    const heard: string[] = [];
    const settings = { staleWaiterTimeout: 5_000, acceptanceLease: 2_000, publish: 'publish' as const };
    let k: ReturnType<typeof lockKeys>;
    beforeAll(async () => {
      redis = connect();
      sub = connect();
      await sub.psubscribe(`${prefix}:*`);
      sub.on('pmessage', (_pattern: string, _channel: string, message: string) => heard.push(message));
    });
    afterAll(async () => {
      await sub.quit();
      await redis.quit();
    });
    beforeEach(() => {
      k = lockKeys(prefix, name);
      heard.length = 0;
    });

    const attempt = (owner: string, waiterId: string, holdId: string, leaseMs = 10_000) =>
      FAIR_LOCK.run(redis, k, {
        idleKeyTtl: IDLE_KEY_TTL,
        leaseMs,
        owner,
        ...settings,
        holdId,
        waiterId,
        mode: 'wait',
      });
    const release = (owner: string, holdId: string) =>
      FAIR_UNLOCK.run(redis, k, {
        idleKeyTtl: IDLE_KEY_TTL,
        owner,
        holdId,
        leaseMs: 10_000,
        acceptanceLease: settings.acceptanceLease,
        publish: 'publish',
        which: 'one',
      });
    const abandon = (waiterId: string, owner: string, holdId: string) =>
      FAIR_ABANDON.run(redis, k, {
        idleKeyTtl: IDLE_KEY_TTL,
        waiterId,
        owner,
        holdId,
        acceptanceLease: settings.acceptanceLease,
        publish: 'publish',
      });
    /** The holder x, and waits w1 (hold id h1) and w2 (h2) queued behind it, in that order. */
    const queueTwo = async () => {
      expect((await attempt('x', 'c0:x', 'hx'))[0]).toBe('granted');
      const refused = await attempt('o1', 'c1:w1', 'h1');
      expect(refused).toEqual(['refused', expect.any(Number), expect.any(Number)]);
      expect(Math.abs(Number(refused[2]) - Date.now())).toBeLessThan(5_000); // Redis's clock, in ms
      expect((await attempt('o2', 'c2:w2', 'h2'))[0]).toBe('refused');
    };

    it('a release sent again after it handed over neither hands over twice nor touches the new hold', async () => {
      await queueTwo();
      expect(await release('x', 'hx')).toBe('released');
      expect(await release('x', 'hx')).toBe('released'); // the repeat
      await eventually(() => heard.length >= 1);
      await sleep(100);
      const token = await redis.get(k.fence);
      expect(heard).toEqual([expect.stringMatching(new RegExp(`^c1:w1\\|${token}:\\d+:h1$`))]);
      expect(await redis.hget(k.lock, 'o1')).toBe('1');
      expect(await redis.hget(k.grants, 'h1')).toBe(`g${token}/${token}|o1`);
      expect(await redis.lrange(k.queue, 0, -1)).toEqual(['o2\0c2:w2']);
      expect(await redis.hgetall(k.waiterHolds)).toEqual({ 'o2\0c2:w2': 'h2' });
    });

    it('an abandon naming the handed hold passes it on once; sent again, it leaves the next hold alone', async () => {
      await queueTwo();
      await release('x', 'hx');
      expect(await abandon('c1:w1', '', 'h1')).toBe(true);
      expect(await abandon('c1:w1', '', 'h1')).toBe(false);
      expect(await abandon('c1:w1', 'o1', '*')).toBe(false); // the wait's whichever: the hold is o2's now
      expect(await redis.hget(k.grants, 'h1')).toBe('r');
      expect(await redis.hget(k.lock, 'o2')).toBe('1');
      expect((await redis.hget(k.grants, 'h2'))?.startsWith('g')).toBe(true);
      // A late message for a hold the wait never had names another id: nothing happens.
      expect(await abandon('c2:w2', '', 'h-other')).toBe(false);
      expect(await redis.hget(k.lock, 'o2')).toBe('1');
    });

    it('an attempt of the wait finds the hold handed to it, and a claim of the registering attempt makes its lease the full one', async () => {
      await queueTwo();
      await release('x', 'hx');
      expect(await redis.pttl(k.lock)).toBeLessThanOrEqual(settings.acceptanceLease);
      const token = Number(await redis.get(k.fence));
      // The registering attempt's reply was lost: the claim finds its hold, and makes the lease the
      // claimed attempt's (the caller counts it from when that attempt was sent).
      expect(
        await CLAIM_ATTEMPT.run(redis, k, { holdId: 'h1', owner: 'o1', leaseMs: 10_000, idleKeyTtl: 60_000 }),
      ).toEqual(['granted', token]);
      expect(await redis.pttl(k.lock)).toBeGreaterThan(settings.acceptanceLease);
      // A later attempt of that wait is told the hold it was handed, not granted a second one.
      expect(await attempt('o1', 'c1:w1', 'h1-later')).toEqual(['granted', token, 'h1']);
      expect(await redis.hget(k.lock, 'o1')).toBe('1');
      expect(await redis.hget(k.grants, 'h1-later')).toBeNull();
    });

    it('a renewal of the owner while the lock is only offered to its wait (count 0) renews nothing: an offer is no hold', async () => {
      expect((await attempt('x', 'c0:x', 'hx'))[0]).toBe('granted');
      // A lease shorter than the acceptance lease: the wait is offered the lock, not granted it in the message.
      expect((await attempt('o1', 'c1:w1', 'h1', 1_000))[0]).toBe('refused');
      await release('x', 'hx');
      expect(await redis.hget(k.lock, 'o1')).toBe('0');
      // A record of an earlier hold of o1 that Redis no longer has (forced, or unlocked by owner
      // elsewhere) is renewed by the watchdog: it must be told the hold is gone, and the offer must keep
      // its acceptance lease (not the renewal's 30 s, again and again while that holder lives).
      const renewed = await RENEW_MANY.run(redis, [k.lock, k.grants, k.fence], [IDLE_KEY_TTL, 'held', 30_000, 'o1']);
      expect(renewed).toEqual([0]);
      expect(await redis.pttl(k.lock)).toBeLessThanOrEqual(settings.acceptanceLease);
      // Accepted, it is a hold, and renewed.
      expect(
        await FAIR_ACCEPT.run(redis, k, {
          leaseMs: 1_000,
          owner: 'o1',
          waiterId: 'c1:w1',
          holdId: 'h1-accept',
          idleKeyTtl: IDLE_KEY_TTL,
        }),
      ).toBe(true);
      expect(await RENEW_MANY.run(redis, [k.lock, k.grants, k.fence], [IDLE_KEY_TTL, 'held', 30_000, 'o1'])).toEqual([
        1,
      ]);
    });

    it('a wait whose registered id was cancelled, or whose lease is shorter than the acceptance lease, is offered the lock and accepts it', async () => {
      await queueTwo();
      expect(
        await CLAIM_ATTEMPT.run(redis, k, { holdId: 'h1', owner: 'o1', leaseMs: 10_000, idleKeyTtl: 60_000 }),
      ).toEqual(['cancelled']);
      await release('x', 'hx');
      await eventually(() => heard.length === 1);
      const token = await redis.get(k.fence);
      expect(heard).toEqual([`c1:w1|${token}`]); // an offer: no hold recorded under the cancelled id
      expect(await redis.hget(k.lock, 'o1')).toBe('0');
      expect(await redis.hget(k.grants, 'h1')).toBe('x');
      const accept = (owner: string, waiterId: string, holdId: string) =>
        FAIR_ACCEPT.run(redis, k, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 10_000, owner, waiterId, holdId });
      expect(await accept('o1', 'c1:w1', 'h1-accept')).toBe(true);
      // A wait asking a lease shorter than the acceptance lease registers no id: offered, too.
      expect((await attempt('o3', 'c3:w3', 'h3', settings.acceptanceLease - 1))[0]).toBe('refused');
      expect(await redis.hget(k.waiterHolds, 'o3\0c3:w3')).toBeNull();
    });
  });
});
