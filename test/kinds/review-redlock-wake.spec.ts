import { RedLock } from '../../lib';
import { engineOf } from '../../lib/internal';
import type { RedLockHandle } from '../../lib/engine/groups/red-lock-handle';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { killAll, startWorker, type Worker } from '../support/workers';

/** `promise`, or 'timed out' after `ms` (the promise itself is left to the clients' close). */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), ms))),
  ]).finally(() => clearTimeout(timer));
}

/**
 * RedLock's wake-ups on the shared five independent masters: a release wakes one waiting process per
 * master (redlock-release-3.lua). Other sets of lock clients stand for other processes here (each has
 * its own connections and client ids); a waiter that dies or freezes is a real OS process
 * (test/workers/hold-lock.ts).
 */
describe('RedLock wake-ups review', () => {
  const prefix = testPrefix();
  const ports = () => sharedTopology('multi').masters.map((m) => m.port);
  const workers: Worker[] = [];
  const opened: TestClient[] = [];
  /** A process's lock clients, one per master, connected. */
  const processOn = async (): Promise<TestClient[]> => {
    const clients = ports().map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000 }));
    opened.push(...clients);
    await Promise.all(clients.map((c) => c.redis.ping()));
    return clients;
  };
  const locksOf = (clients: TestClient[]) => clients.map((c) => c.locks);

  afterEach(async () => {
    killAll(workers.splice(0));
    await Promise.all(opened.splice(0).map((c) => c.close().catch(() => undefined)));
  });

  it.each(['SIGSTOP', 'SIGKILL'] as const)(
    'a process first in line on every master that got a %s does not hold the next waiter back until the lease ends',
    async (signal) => {
      const name = `head-${signal}`;
      const [holderClients, nextClients] = [await processOn(), await processOn()];
      const { waiting, channel } = holderClients[0].locks.getSimpleLock(name).keys;
      const registries = () => Promise.all(holderClients.map((c) => c.redis.zrange(waiting, 0, -1)));
      const holder = await new RedLock(locksOf(holderClients), name).lock(); // watchdog: a 30 s lease, renewed
      const env = { REDLOCK_PORTS: ports().join(','), KEY_PREFIX: prefix, LOCK_NAME: name, LOCK_KIND: 'redlock' };
      const head = startWorker('hold-lock.ts', env);
      workers.push(head);
      await eventually(async () => (await registries()).every((r) => r.length === 1), 15_000);
      const headIds = (await registries()).map((r) => r[0]);
      if (signal === 'SIGKILL') {
        // Found by the release itself, not by a re-check of the next waiter's own (none for a minute).
        for (const c of nextClients) engineOf(c.locks).quietRecheckMs = 60_000;
      }
      const waitingNext = new RedLock(locksOf(nextClients), name).lock();
      waitingNext.catch(() => undefined); // a failed assertion leaves it to afterEach's close
      await eventually(async () => (await registries()).every((r) => r.length === 2), 5_000);
      await sleep(600); // refused everywhere after the gate's refusal: it sleeps until a release

      head.child.kill(signal);
      if (signal === 'SIGKILL') {
        // Its subscriptions are gone once each master has seen its connections close.
        await eventually(async () => {
          const numsub = holderClients.map((c, i) => c.redis.pubsub('NUMSUB', `${channel}:${headIds[i]}`));
          return (await Promise.all(numsub)).every((reply) => (reply as [string, number])[1] == 0);
        }, 5_000);
      }
      try {
        const releasedAt = Date.now();
        expect(await holder.release()).toBe('released');
        const handle = await within(waitingNext, 10_000);
        const waited = Date.now() - releasedAt;
        process.stdout.write(
          `\nRedLock: next waiter got the lock ${waited} ms after a release past a ${signal}ed head\n`,
        );
        // Without a re-check, past a frozen head it slept until its last refusal's lease (about 30 s).
        expect(handle).not.toBe('timed out');
        expect(waited).toBeLessThan(5_000);
        expect(await (handle as RedLockHandle).release()).toBe('released');
      } finally {
        if (signal === 'SIGSTOP') head.child.kill('SIGCONT');
      }
    },
    60_000,
  );
});
