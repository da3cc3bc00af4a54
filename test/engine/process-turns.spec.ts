import type { LockClient } from '../../lib';
import { runInLockScope } from '../../lib';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * Processes take turns on a contended reentrant or simple lock (lib/engine/process-turns.ts): a
 * release inside the holder's turn wakes nobody, the holder's process re-acquires or hands the lock
 * to its own waiters, and once the turn is over the lock is passed to the process that waited longest.
 * Each LockClient here stands for a process (its own connections and client id). A long `turnTime`
 * makes "inside the turn" certain on a slow machine; `turnTime: 0` makes every release pass.
 */
describe.each(['reentrant', 'simple'] as const)('%s lock: process turns', (kind) => {
  const prefix = testPrefix();
  const clients: TestClient[] = [];
  const client = (turnTime: number) => {
    const created = lockClient({ keyPrefix: prefix, turnTime });
    clients.push(created);
    return created;
  };
  const lockOf = (locks: LockClient, name: string) =>
    kind === 'simple' ? locks.getSimpleLock(name, { leaseTime: 'watchdog' }) : locks.getLock(name);
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  /** Scripts of one kind `client` sends for lock `key` from now on. */
  function countScripts(of: TestClient, key: string) {
    const counts = { attempts: 0, passes: 0 };
    const send = of.redis.sendCommand.bind(of.redis);
    of.redis.sendCommand = ((command: { name: string; args: unknown[] }, ...rest: unknown[]) => {
      if (/^eval/.test(command.name) && command.args[2] === key) {
        const second = String(command.args[3]);
        if (second.endsWith(':fence')) counts.attempts++;
        // pass-wake-4: 4 keys and 3 arguments after the SHA and the key count
        if (second.endsWith(':unlock') && command.args.length === 9) counts.passes++;
      }
      return (send as (...a: unknown[]) => unknown)(command, ...rest);
    }) as typeof of.redis.sendCommand;
    return counts;
  }

  /** Starts a wait on `name` from `waiter`; resolves once its process is registered as waiting. */
  async function waitingOn(waiter: TestClient, name: string, watcher: TestClient) {
    const acquired = lockOf(waiter.locks, name).lock({ leaseTime: 60_000 });
    const waitingKey = lockOf(watcher.locks, name).keys.waiting;
    await eventually(async () => (await watcher.redis.zscore(waitingKey, waiter.locks.clientId)) !== null, 5_000);
    await sleep(100); // parked after its attempts
    return { acquired };
  }

  it('inside its turn a process takes the lock again and again without waking the process that waits', async () => {
    const [a, b] = [client(60_000), client(60_000)];
    const name = 'loop';
    const held = await lockOf(a.locks, name).lock({ leaseTime: 60_000 });
    const { acquired: waiting } = await waitingOn(b, name, a);
    const bScripts = countScripts(b, lockOf(b.locks, name).keys.lock);
    const aScripts = countScripts(a, lockOf(a.locks, name).keys.lock);
    await held.release();
    for (let i = 0; i < 20; i++) {
      const again = await lockOf(a.locks, name).lock({ leaseTime: 60_000, waitTime: 5_000 });
      await again.release();
    }
    expect(bScripts.attempts).toBe(0); // never woken while A kept taking it
    // A stops asking: it passes the lock on itself, well before B's once-a-second re-check.
    const stoppedAt = Date.now();
    const next = await waiting;
    expect(Date.now() - stoppedAt).toBeLessThan(900);
    expect(aScripts.passes).toBe(1);
    expect(bScripts.attempts).toBe(1);
    await next.release();
  });

  it('a release inside the turn hands the lock to a waiter of the same process, re-entries included', async () => {
    const [a, b] = [client(60_000), client(60_000)];
    const name = 'local';
    const order: string[] = [];
    const first = await lockOf(a.locks, name).lock({ leaseTime: 60_000 });
    const { acquired: bWaiting } = await waitingOn(b, name, a);
    const bScripts = countScripts(b, lockOf(b.locks, name).keys.lock);
    const locals = ['x', 'y', 'z'].map((id) =>
      runInLockScope(() =>
        lockOf(a.locks, name).withLock(async () => {
          order.push(id);
          if (kind === 'reentrant') {
            // re-entry under a local hand-off: the same owner nests and unwinds
            await lockOf(a.locks, name).withLock(async () => {
              expect(await a.locks.getLock(name).getHoldCount()).toBe(2);
            });
          }
          await sleep(5);
        }),
      ),
    );
    await sleep(200); // the local waiters are parked
    await first.release();
    await Promise.all(locals);
    expect(order.sort()).toEqual(['x', 'y', 'z']);
    expect(bScripts.attempts).toBe(0); // the lock stayed in A's process while A wanted it
    const bHandle = await bWaiting;
    expect(bScripts.attempts).toBe(1);
    await bHandle.release();
  });

  it('once the turn is over the lock goes to the process that waited, even if the passer asks again at once', async () => {
    const [a, b] = [client(0), client(0)];
    const name = 'pass';
    const held = await lockOf(a.locks, name).lock({ leaseTime: 60_000 });
    const { acquired: bWaiting } = await waitingOn(b, name, a);
    await held.release();
    const aAgain = lockOf(a.locks, name).lock({ leaseTime: 60_000 }); // sent before B could wake
    const bHandle = await bWaiting;
    const aState = await Promise.race([aAgain.then(() => 'granted'), sleep(300).then(() => 'waiting')]);
    expect(aState).toBe('waiting'); // B holds it: A's attempt was refused by the hand-over to B
    await bHandle.release();
    await (await aAgain).release();
  });
});
