import { engineOf, type LockHandle } from '../../lib/internal';
import { killAll, startWorker, type Worker } from '../support/workers';
import {
  eventually,
  isAttemptOn,
  lockClient,
  parkedWait,
  singlePort,
  sleep,
  testPrefix,
  watchCommands,
  type TestClient,
} from '../support/engine';

/**
 * Reentrant and simple locks wake one waiting process per release (lua/include/wake-one-process.lua).
 * Other lock clients stand for other processes here (each has its own connections and client id);
 * a waiter that dies or freezes is a real OS process (test/workers/hold-lock.ts).
 */
describe.each(['reentrant', 'simple'] as const)('%s lock: one wake-up per release', (kind) => {
  const prefix = testPrefix();
  let holder: TestClient;
  const workers: Worker[] = [];
  const others: TestClient[] = [];
  const lockOf = (client: TestClient, name: string) =>
    kind === 'simple' ? client.locks.getSimpleLock(name, { leaseTime: 'watchdog' }) : client.locks.getLock(name);

  beforeAll(() => (holder = lockClient({ keyPrefix: prefix })));
  afterEach(async () => {
    killAll(workers);
    await Promise.all(others.splice(0).map((c) => c.close()));
  });
  afterAll(() => holder.close());

  /** Attempts (lock scripts) each client sends from now on. */
  function countAttempts(clients: TestClient[], key: string): () => number[] {
    const counts = clients.map(() => 0);
    clients.forEach((client, i) =>
      watchCommands(client, (command) => {
        if (isAttemptOn(command, key)) counts[i]++;
      }),
    );
    return () => [...counts];
  }

  it('a release makes exactly one of four waiting processes try, the one that waited longest', async () => {
    const name = 'four';
    const held = await lockOf(holder, name).lock({ leaseTime: 60_000 });
    const clients = Array.from({ length: 4 }, () => lockClient({ keyPrefix: prefix }));
    // Every attempt counted here is a wake-up's, not the once-a-second re-check of a waiter that heard
    // nothing (a busy machine can stretch this test past a second).
    for (const client of clients) engineOf(client.locks).quietRecheckMs = 60_000;
    others.push(...clients);
    const waits: Promise<LockHandle>[] = [];
    for (const client of clients) {
      // Parked (its re-check after subscribing answered too) before the next starts: a late re-check
      // would be counted below as a wake-up's attempt.
      const { acquired } = await parkedWait(client, lockOf(client, name));
      waits.push(acquired);
      await eventually(
        async () => (await holder.redis.zcard(lockOf(holder, name).keys.waiting)) === waits.length,
        5_000,
      );
    }
    const attempts = countAttempts(clients, lockOf(holder, name).keys.lock);
    await held.release();
    const first = await waits[0];
    await sleep(300);
    expect(attempts()).toEqual([1, 0, 0, 0]);
    await first.release();
    const second = await waits[1];
    await sleep(300);
    expect(attempts()).toEqual([1, 1, 0, 0]);
    await second.release();
    await (await waits[2]).release();
    await (await waits[3]).release();
  }, 30_000);

  it('a process whose last waiter gave up leaves the line, so the next release wakes one that still waits', async () => {
    const name = 'gave-up';
    const lock = lockOf(holder, name);
    const held = await lock.lock({ leaseTime: 60_000 });
    const [quitter, stayer] = [lockClient({ keyPrefix: prefix }), lockClient({ keyPrefix: prefix })];
    others.push(quitter, stayer);
    const gaveUp = lockOf(quitter, name).tryLock({ waitTime: 500 });
    await eventually(async () => (await holder.redis.zcard(lock.keys.waiting)) === 1, 5_000);
    const waiting = lockOf(stayer, name).lock({ leaseTime: 60_000 });
    expect(await gaveUp).toBeNull();
    await eventually(
      async () => (await holder.redis.zrange(lock.keys.waiting, 0, -1)).join() === stayer.locks.clientId,
      5_000,
    );
    const releasedAt = Date.now();
    await held.release();
    await (await waiting).release();
    expect(Date.now() - releasedAt).toBeLessThan(500); // woken, not found by the 1 s re-check
  }, 30_000);

  it.each(['SIGKILL', 'SIGSTOP'] as const)(
    'a waiting process at the head of the line that got a %s does not stall the others',
    async (signal) => {
      const name = `stalled-${signal}`;
      const lock = lockOf(holder, name);
      const held = await lock.lock({ leaseTime: 60_000 });
      const env = { REDIS_PORT: singlePort(), KEY_PREFIX: prefix, LOCK_NAME: name, LOCK_KIND: kind };
      const head = startWorker('hold-lock.ts', env);
      workers.push(head);
      await eventually(async () => (await holder.redis.zcard(lock.keys.waiting)) === 1, 15_000);
      const [headId] = await holder.redis.zrange(lock.keys.waiting, 0, 0);
      const next = lockClient({ keyPrefix: prefix });
      others.push(next);
      const waiting = lockOf(next, name).lock({ leaseTime: 60_000 });
      await eventually(async () => (await holder.redis.zcard(lock.keys.waiting)) === 2, 5_000);
      await sleep(200);

      head.child.kill(signal);
      if (signal === 'SIGKILL') {
        // Its subscription is gone once Redis has seen the connection close.
        const channel = `${lock.keys.channel}:${headId}`;
        await eventually(
          async () => ((await holder.redis.pubsub('NUMSUB', channel)) as [string, number])[1] == 0,
          5_000,
        );
      }
      const releasedAt = Date.now();
      await held.release();
      const handle = await waiting;
      const waited = Date.now() - releasedAt;
      process.stdout.write(
        `\n${kind}: next waiter got the lock ${waited} ms after a release addressed past a ${signal}ed head\n`,
      );
      // Dead: skipped by the release itself; frozen: the others re-check after a quiet second.
      expect(waited).toBeLessThan(signal === 'SIGKILL' ? 1_000 : 4_000);
      expect(handle.isLost).toBe(false);
      if (signal === 'SIGSTOP') head.child.kill('SIGCONT');
      await handle.release();
    },
    30_000,
  );
});
