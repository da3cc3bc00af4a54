import { RedLock } from '../../lib';
import { engineOf, type LockHandle } from '../../lib/internal';
import type { RedLockHandle } from '../../lib/engine/groups/red-lock-handle';
import {
  eventually,
  isAttemptOn,
  lockClient,
  sleep,
  testPrefix,
  watchCommands,
  type TestClient,
} from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { killAll, startWorker, type Worker } from '../support/workers';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';

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
 * master (redlock-release-3.lua), on the channel a simple lock of the name uses too (the keys are a
 * simple lock's). Other sets of lock clients stand for other processes here (each has its own
 * connections and client ids); a waiter that dies or freezes is a real OS process
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

  it("a simple lock's wake-up taken by its process's RedLock waiter of the name (one channel) reaches the simple waiter", async () => {
    const name = 'shared-channel';
    // The waiting process: a RedLock waiter and, on its second master's client, a simple lock waiter of
    // the same name. Neither re-checks on its own (none for a minute): only wake-ups reach them.
    const waiterClients = await processOn();
    for (const c of waiterClients) engineOf(c.locks).quietRecheckMs = 60_000;
    const redLockHolder = await processOn();
    const shared = waiterClients[1];
    const simpleOf = (client: TestClient) => client.locks.getSimpleLock(name, { leaseTime: 'watchdog' });
    // Another process holds the simple lock on the second master, a RedLock the other four (a quorum).
    const simpleOnShared = lockClient({ port: ports()[1], keyPrefix: prefix, operationTimeout: 1_000 });
    opened.push(simpleOnShared);
    const heldSimple = await simpleOf(simpleOnShared).lock();
    const heldRedLock = await new RedLock(locksOf(redLockHolder), name).lock();
    // Decided at the quorum: the last vote is adopted when it lands.
    await eventually(() => heldRedLock.handles.map((h) => h !== null).join() === 'true,false,true,true,true', 2_000);

    const waitingRedLock = new RedLock(locksOf(waiterClients), name).lock();
    waitingRedLock.catch(() => undefined);
    const { waiting, lock: lockKey } = simpleOf(shared).keys;
    await eventually(async () => (await shared.redis.zrange(waiting, 0, -1)).includes(shared.locks.clientId), 5_000);
    await sleep(600); // the RedLock waiter sleeps until a release, parked first on the shared channel
    const waitingSimple = simpleOf(shared).lock();
    waitingSimple.catch(() => undefined);
    await sleep(300); // refused, parked behind it
    // Which script the waiting process sends to the shared master from now on: a RedLock vote has 3 keys.
    const sent: string[] = [];
    watchCommands(shared, (command) => {
      if (isAttemptOn(command, lockKey)) sent.push(String(command.args[1]) === '3' ? 'redlock' : 'simple');
    });

    const releasedAt = Date.now();
    await heldSimple.release();
    const handle = await within(waitingSimple, 10_000);
    const waited = Date.now() - releasedAt;
    process.stdout.write(`\nsimple waiter got the lock ${waited} ms after the release, attempts: ${sent.join(' ')}\n`);
    expect(handle).not.toBe('timed out');
    // The wake-up went to the RedLock waiter, whose round took the shared master and gave it back
    // (no quorum: the other RedLock holds the rest), announcing it: that woke the simple waiter.
    expect(sent[0]).toBe('redlock');
    expect(sent).toContain('simple');
    // Spent there, it would sleep until its refusal's lease (the watchdog's 30 s).
    expect(waited).toBeLessThan(5_000);
    // Passed on, not spent twice: the simple lock holds the shared master, the RedLock waiter still waits.
    expect(await shared.redis.get(lockKey)).toBe((handle as LockHandle).owner);
    expect(await within(waitingRedLock, 500)).toBe('timed out');
    expect(await (handle as LockHandle).release()).toBe('released');
    expect(await heldRedLock.release()).toBe('released');
    const redLockHandle = await within(waitingRedLock, 10_000);
    expect(redLockHandle).not.toBe('timed out');
    expect(await (redLockHandle as RedLockHandle).release()).toBe('released');
  }, 60_000);

  it('a release announced by the gate while its refusal is still on the way wakes the waiter at once (the message read first)', async () => {
    const name = 'message-before-refusal';
    const proxy = await ReplyDroppingProxy.start({ host: '127.0.0.1', port: ports()[0] });
    try {
      const holderClients = await processOn();
      // The waiting process reaches the gate (the first master) through the proxy: its votes' replies
      // come 800 ms late there, its subscriber's messages at once.
      const waiterClients = ports().map((port, i) =>
        lockClient({ port: i === 0 ? proxy.port : port, keyPrefix: prefix, operationTimeout: 5_000 }),
      );
      opened.push(...waiterClients);
      await Promise.all(waiterClients.map((c) => c.redis.ping()));
      // Only a release's message wakes it: no re-check of its own, and a gate's refusal is believed for
      // up to the instance timeout (5 s) when no release is heard.
      for (const c of waiterClients) engineOf(c.locks).quietRecheckMs = 60_000;
      const holder = await new RedLock(locksOf(holderClients), name).lock({ leaseTime: 30_000 });
      const lockKey = holderClients[0].locks.getSimpleLock(name).keys.lock;
      let votesOnGate = 0;
      watchCommands(waiterClients[0], (command) => {
        if (/^eval/.test(command.name) && command.args[2] === lockKey) votesOnGate++;
      });
      proxy.delayCommandReplies(800);
      const waiting = new RedLock(locksOf(waiterClients), name, { instanceTimeout: 5_000 }).lock({
        leaseTime: 30_000,
        waitTime: 20_000,
      });
      waiting.catch(() => undefined);
      // The first round asks every master; refused, the waiter subscribes and asks the gate alone.
      await eventually(() => votesOnGate === 2, 5_000);
      await sleep(100); // that vote ran on the gate (refused); its reply is still on the way
      const releasedAt = Date.now();
      expect(await holder.release()).toBe('released');
      const handle = await within(waiting, 10_000);
      const waited = Date.now() - releasedAt;
      expect(handle).not.toBe('timed out');
      // Counted as heard before the refusal, the message was taken for an older release: the waiter
      // slept the whole instance timeout (5 s) before asking again.
      expect(waited).toBeLessThan(3_000);
      proxy.delayCommandReplies(0);
      expect(await (handle as RedLockHandle).release()).toBe('released');
    } finally {
      await Promise.all(opened.splice(0).map((c) => c.close().catch(() => undefined)));
      await proxy.close();
    }
  }, 60_000);
});
