import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { createLockClient, LockClient, runInLockScope, type LockLostError, type ReplicaSyncSetting } from '../../lib';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { eventually, recordingLogger, sleep } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { loadedScript } from '../../lib/engine/scripts/loader';

/**
 * replicaSync 'auto', the default: a first acquisition WAITs for one replica when the master has one
 * online, so a failover (which promotes the most up-to-date replica) keeps the lock. Counted with
 * INFO commandstats on the master, not timed. Private master + 3 replicas on 7221-7224, since the
 * replicas are frozen here.
 */
const BASE_PORT = PRIVATE_PORTS.replicaSync.base;

describe("replica sync 'auto' (the default)", () => {
  let topology: RunningTopology;
  let admin: Redis;
  const open: LockClient[] = [];
  const logger = recordingLogger();
  const warnings = logger.messages;

  beforeAll(async () => {
    topology = await startTopology('replica', { basePort: BASE_PORT, name: 'replica-sync' });
    admin = new Redis({ ...topology.masters[0], maxRetriesPerRequest: 1 });
  }, 60_000);
  afterEach(async () => {
    warnings.length = 0;
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    admin?.disconnect();
    if (topology) await stopTopology(topology);
  });

  const client = async (replicaSync?: ReplicaSyncSetting, keyPrefix = `rs-${randomUUID().slice(0, 8)}`) => {
    const locks = await createLockClient({
      connection: { type: 'master-slave', master: topology.masters[0], replicas: topology.replicas },
      keyPrefix,
      replicaSync,
      logger,
    });
    open.push(locks);
    return locks;
  };

  const waitCalls = async (server: Redis): Promise<number> => {
    const line = (await server.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_wait:'));
    return line ? Number(/calls=(\d+)/.exec(line)![1]) : 0;
  };

  it('waits for a replica after each first acquisition, not after a re-entry; the lock is on a replica by then', async () => {
    const locks = await client();
    const before = await waitCalls(admin);
    let onReplicas: number[] = [];
    await locks.getLock('synced').withLock(async () => {
      onReplicas = await Promise.all(
        topology.replicas.map((r) => {
          const replica = new Redis({ ...r, maxRetriesPerRequest: 1 });
          return replica.exists(`${locks.keyPrefix}:{synced}`).finally(() => replica.disconnect());
        }),
      );
      await locks.getLock('synced').withLock(async () => undefined); // a re-entry: no second WAIT
    });
    expect(await waitCalls(admin)).toBe(before + 1);
    expect(onReplicas).toContain(1);
    expect(warnings).toEqual([]);
  });

  it('on a hot key, every grant is waited on, inside a turn too: each acquisition is a grant Redis makes', async () => {
    // Two clients, as two processes: the key moves between them in turns. Nothing is lent inside a turn
    // (issue 39): every acquisition is a grant Redis makes, and WAITs.
    const keyPrefix = `rs-${randomUUID().slice(0, 8)}`;
    const [a, b] = [await client(undefined, keyPrefix), await client(undefined, keyPrefix)];
    const before = await waitCalls(admin);
    let acquisitions = 0;
    let moves = 0;
    let last: LockClient | undefined;
    const until = Date.now() + 10_000;
    const loop = (locks: LockClient) =>
      runInLockScope(
        async () => {
          while (moves < 30 && Date.now() < until) {
            const handle = await locks.getLock('hot').lock({ waitTime: 5_000 });
            acquisitions++;
            if (last !== undefined && last !== locks) moves++;
            last = locks;
            await handle.release();
          }
        },
        { newScope: true },
      );
    await Promise.all([loop(a), loop(b), loop(a), loop(b)]);
    const waits = (await waitCalls(admin)) - before;
    expect(moves).toBeGreaterThanOrEqual(30);
    expect(waits).toBeGreaterThanOrEqual(acquisitions);
  });

  it('replicas that do not answer: one stall, a warning, the lock kept; no wait again until they are read afresh', async () => {
    const locks = await client();
    await locks.getLock('warm-up').withLock(async () => undefined); // replicas read as online
    for (const r of topology.replicas) await signalNode(topology, r.port, 'SIGSTOP');
    try {
      const before = await waitCalls(admin);
      const first = await locks.getLock('frozen-1').lock();
      const second = await locks.getLock('frozen-2').lock();
      expect(await waitCalls(admin)).toBe(before + 1);
      expect(first.signal.aborted).toBe(false);
      expect(await locks.getLock('frozen-1').isLocked()).toBe(true);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('Lock "frozen-1": no replica acknowledged it within 1000 ms; kept');
      await Promise.all([first.release(), second.release()]);
    } finally {
      for (const r of topology.replicas) await signalNode(topology, r.port, 'SIGCONT');
    }
  });

  it('a hold granted in a hand-over message is not reported lost while its first renewal waits for silent replicas', async () => {
    // The waiter believes a fair lock's hand-over message (its replicas last read as not answering: a
    // grant it could not WAIT for), on its acceptance lease, and renews itself at half of it. By then
    // its count of replicas is read afresh (online), so that renewal WAITs for them, up to 1 s: the master
    // has the full lease all along, and the hold must not be told it lost the lock at the first lease's end.
    const keyPrefix = `rs-${randomUUID().slice(0, 8)}`;
    const [holder, waiter] = [await client(undefined, keyPrefix), await client(undefined, keyPrefix)];
    // 1.6 s: the renewal at its half has 0.8 s to land before Redis lets the hold go, less than a 1 s WAIT.
    const options = { acceptanceLease: 1_600 };
    await waiter.getLock('warm-up').withLock(async () => undefined); // replicas read as online
    for (const r of topology.replicas) await signalNode(topology, r.port, 'SIGSTOP');
    try {
      const held = await holder.getFairLock('handed', options).lock();
      await waiter.getLock('stall').withLock(async () => undefined); // no answer: read as replica-less
      const lost: LockLostError[] = [];
      waiter.on('lockLost', (error) => lost.push(error));
      const waiting = waiter.getFairLock('handed', options).lock({ waitTime: 20_000 });
      await eventually(async () => (await admin.llen(`${keyPrefix}:{handed}:queue`)) === 1);
      await sleep(1_200); // the waiter's count goes stale: the hand-over's look at it reads it afresh behind
      await held.release();
      const handle = await waiting;
      await sleep(2_500);
      expect(lost.map((error) => error.message)).toEqual([]);
      expect(handle.signal.aborted).toBe(false);
      expect(await admin.pttl(`${keyPrefix}:{handed}`)).toBeGreaterThan(20_000);
      expect(await handle.release()).toBe('released');
    } finally {
      for (const r of topology.replicas) await signalNode(topology, r.port, 'SIGCONT');
    }
  }, 30_000);

  it("a lock asked for while the client's first connection is made is waited on, not checked as if a failover lost it", async () => {
    // Commands wait for ioredis's first connection, so no grant can be made anywhere else first: the
    // grant is waited on like any other, and not settled again with claim-attempt (one round trip more).
    const claim = loadedScript('claim-attempt-3.lua');
    await admin.script('LOAD', claim.source); // sent by its SHA alone (no EVAL after a NOSCRIPT to count twice)
    const redis = new Redis({ ...topology.masters[0], maxRetriesPerRequest: 1 });
    const claims = () => sent.filter((args) => args[0] === claim.sha || args[0] === claim.source).length;
    const sent: unknown[][] = [];
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = (command, stream) => {
      // Written now (a command sent before the connection is ready comes here again when it is written).
      if ((command.name === 'evalsha' || command.name === 'eval') && redis.status === 'ready') sent.push(command.args);
      return send(command, stream);
    };
    const locks = new LockClient({ redis, keyPrefix: `rs-${randomUUID().slice(0, 8)}`, logger });
    try {
      expect(redis.status).not.toBe('ready');
      const before = await waitCalls(admin);
      await locks.getLock('first').withLock(async () => undefined);
      expect(await waitCalls(admin)).toBe(before + 1);
      expect(claims()).toBe(0);

      // A reconnect is another matter: a grant asked for meanwhile is checked on the master serving it now.
      const reconnecting = new Promise((resolve) => redis.once('reconnecting', resolve));
      redis.disconnect(true);
      await reconnecting;
      await locks.getLock('after-reconnect').withLock(async () => undefined);
      expect(claims()).toBe(1);
      expect(warnings).toEqual([]);
    } finally {
      await locks.close();
      redis.disconnect();
    }
  });

  it('replicaSync false never waits', async () => {
    const locks = await client(false);
    const before = await waitCalls(admin);
    await locks.getLock('unsynced').withLock(async () => undefined);
    expect(await waitCalls(admin)).toBe(before);
  });

  it('a master without replicas is never waited on', async () => {
    const single = sharedTopology('single').masters[0];
    const server = new Redis({ ...single, maxRetriesPerRequest: 1 });
    const locks = await createLockClient({
      connection: { type: 'single', ...single },
      keyPrefix: `rs-${randomUUID().slice(0, 8)}`,
      logger,
    });
    open.push(locks);
    try {
      const before = await waitCalls(server);
      await locks.getLock('alone').withLock(async () => undefined);
      await locks.getFairLock('alone-fair').withLock(async () => undefined);
      expect(await waitCalls(server)).toBe(before);
    } finally {
      server.disconnect();
    }
  });
});
