import { LockError, RedLock } from '../../lib';
import { RedLockHandle } from '../../lib/engine/groups/red-lock-handle';
import { engineOf } from '../../lib/internal';
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

/** RedLock's waiting, attacked: aborts and give-ups at the moments between its rounds. */
describe('RedLock waiting review', () => {
  const prefix = testPrefix();
  const clientsFor = async (): Promise<TestClient[]> => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const clients = ports.map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000 }));
    await Promise.all(clients.map((c) => c.redis.ping()));
    return clients;
  };
  const closeAll = (clients: TestClient[]) => Promise.all(clients.map((c) => c.close().catch(() => undefined)));

  it('a caller that aborts while a round of its wait runs (after its first) ends at once, not at the holder lease', async () => {
    const holders = await clientsFor();
    const waiters = await clientsFor();
    try {
      const name = 'aborted-in-later-round';
      const held = await new RedLock(
        holders.map((c) => c.locks),
        name,
      ).lock({ leaseTime: 20_000 });
      const controller = new AbortController();
      const reason = new Error('caller gave up');
      // The last master is asked only by rounds that ask every master: the first round, and the one after
      // the gate refused with no release announced. The caller gives up as the second of them is sent.
      const lockKey = waiters[4].locks.getSimpleLock(name).keys.lock;
      // Counted by token: a script the server did not have yet is sent twice (EVALSHA, then EVAL).
      const tokens = new Set<unknown>();
      let abortedAt = 0;
      watchCommands(waiters[4], (command) => {
        if (!isAttemptOn(command, lockKey) || tokens.has(command.args[5])) return;
        tokens.add(command.args[5]);
        if (tokens.size === 2) {
          abortedAt = Date.now();
          controller.abort(reason);
        }
      });
      const outcome = new RedLock(
        waiters.map((c) => c.locks),
        name,
      )
        .lock({ signal: controller.signal })
        .then(
          () => new Error('granted while held'),
          (error: unknown) => error,
        );
      const result = await outcome;
      expect(abortedAt).toBeGreaterThan(0);
      expect(result).toBe(reason);
      // Without the fix it slept until the holder's lease (20 s) before it saw the abort.
      expect(Date.now() - abortedAt).toBeLessThan(3_000);
      await held.release();
    } finally {
      await closeAll(waiters);
      await closeAll(holders);
    }
  }, 60_000);

  it('a wait whose clients are closed ends with a LockError, and takes nothing through them once the lock is free', async () => {
    const holders = await clientsFor();
    const waiters = await clientsFor();
    try {
      const name = 'closed-while-waiting';
      const held = await new RedLock(
        holders.map((c) => c.locks),
        name,
      ).lock({ leaseTime: 20_000 });
      const outcome = new RedLock(
        waiters.map((c) => c.locks),
        name,
      )
        .lock()
        .then(
          (handle) => handle,
          (error: unknown) => error,
        );
      await sleep(500); // waiting, refused by every master
      // The application shuts down: its lock clients close (the ioredis connections are its own and stay open).
      await Promise.all(waiters.map((c) => c.locks.close()));
      const closedAt = Date.now();
      await held.release(); // the lock is free on every master now
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still waiting'), 5_000)));
      const result = await Promise.race([outcome, late]);
      clearTimeout(timer);
      if (result instanceof RedLockHandle) await result.release().catch(() => undefined);
      expect(result).toBeInstanceOf(LockError);
      expect(Date.now() - closedAt).toBeLessThan(5_000);
      // Nothing held through the closed clients.
      const ttls = await Promise.all(waiters.map((c) => c.redis.pttl(c.locks.getSimpleLock(name).keys.lock)));
      expect(ttls.filter((ttl) => ttl !== -2)).toEqual([]);
    } finally {
      await closeAll(waiters);
      await closeAll(holders);
    }
  }, 60_000);
  it("each vote says how its process waits: '-' never refused, '0' refused before, '1' another wait of its process is registered", async () => {
    const holders = await clientsFor();
    const waiters = await clientsFor();
    try {
      const name = 'vote-flags';
      const lockKey = waiters[0].locks.getSimpleLock(name).keys.lock;
      // The flags of the votes on the first master, in order, by the owner in their token (a script the
      // server did not have yet is sent twice: once per token).
      const votes = new Map<string, { owner: string; flag: string }>();
      watchCommands(waiters[0], (command) => {
        if (!isAttemptOn(command, lockKey)) return;
        const token = String(command.args[5]);
        votes.set(token, { owner: token.slice(37), flag: String(command.args[9]) });
      });
      const flagsOf = (owner: string) => [...votes.values()].filter((v) => v.owner === owner).map((v) => v.flag);
      const lockOf = (clients: TestClient[]) =>
        new RedLock(
          clients.map((c) => c.locks),
          name,
        );
      // Uncontended: the vote's process is not registered, and a grant leaves the registry alone.
      await (await lockOf(waiters).lock({ owner: 'alone' })).release();
      expect(flagsOf('alone')).toEqual(['-']);
      const held = await lockOf(holders).lock({ leaseTime: 20_000 });
      // Each released as soon as it has the lock: whichever the release wakes first, neither waits for ever.
      const releaseWhenHeld = (owner: string) =>
        lockOf(waiters)
          .lock({ owner })
          .then((handle) => handle.release());
      const first = releaseWhenHeld('first');
      // Refused, and waiting: its first vote, then (joined its process's waiters, subscribed) its gate vote.
      await eventually(() => flagsOf('first').length >= 2);
      // A second wait of the same process starts while the first is registered: its first vote says so.
      const second = releaseWhenHeld('second');
      await eventually(() => flagsOf('second').length >= 2);
      await held.release();
      await Promise.all([first, second]);
      const [firstOfFirst, ...laterOfFirst] = flagsOf('first');
      expect(firstOfFirst).toBe('-');
      expect(laterOfFirst.length).toBeGreaterThan(0);
      expect(laterOfFirst.every((flag) => flag === '0' || flag === '1')).toBe(true);
      expect(flagsOf('second')[0]).toBe('1');
    } finally {
      await closeAll(waiters);
      await closeAll(holders);
    }
  }, 60_000);

  it('a wait that was refused by some masters leaves their waiting registries once it ends: granted by the others, or out of time after its first round', async () => {
    const [rival, winner, waiter] = [await clientsFor(), await clientsFor(), await clientsFor()];
    try {
      const name = 'registered-then-granted';
      const { waiting } = rival[0].locks.getSimpleLock(name).keys;
      const registered = (clients: TestClient[], index: number) =>
        rival[index].redis.zrange(waiting, 0, -1).then((ids) => ids.includes(clients[index].locks.clientId));
      // Another process holds the name on the last two masters (a simple lock there, the same keys).
      const rivalHolds = await Promise.all(rival.slice(3).map((c) => c.locks.getSimpleLock(name).lock()));
      // A simple lock waits on the last master (a process that does want it), released by nothing but a wake-up.
      engineOf(waiter[4].locks).quietRecheckMs = 60_000;
      const waiting4 = waiter[4].locks.getSimpleLock(name).lock({ waitTime: 20_000 });
      waiting4.catch(() => undefined);
      await eventually(() => registered(waiter, 4));

      // Granted by the first three in its first round; refused (and so registered) by the last two.
      const handle = await new RedLock(
        winner.map((c) => c.locks),
        name,
      ).lock({ waitTime: 5_000, leaseTime: 20_000 });
      await eventually(async () => !(await registered(winner, 3)) && !(await registered(winner, 4)), 5_000);
      expect(await registered(waiter, 4)).toBe(true); // the process that waits keeps its place

      // Out of time after one round refused everywhere: it registered on every master, and leaves.
      const late = new RedLock(
        rival.map((c) => c.locks),
        name,
      );
      expect(await late.tryLock({ waitTime: 1, leaseTime: 20_000 })).toBeNull();
      await eventually(async () => {
        const still = await Promise.all([0, 1, 2, 3, 4].map((i) => registered(rival, i)));
        return still.every((s) => !s);
      }, 5_000);

      // The last master's release wakes the waiting process itself (no hop through a process done waiting).
      expect(await rivalHolds[1].release()).toBe('released');
      const taken = await waiting4;
      expect(await taken.release()).toBe('released');
      expect(await rivalHolds[0].release()).toBe('released');
      expect(await handle.release()).toBe('released');
    } finally {
      await closeAll(waiter);
      await closeAll(winner);
      await closeAll(rival);
    }
  }, 60_000);
});
