import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { createLockClient, runInLockScope, type LockClient } from '../../lib';
import { eventually, quietLogger } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * A Cluster client with `scaleReads` sends commands flagged read-only to replicas. A replica lags,
 * and after a failover one may still show a hold the promoted master never had: the engine's reads
 * (was an unanswered attempt granted? is it locked? how many holds?) must reach the master.
 */
describe('an ioredis Cluster with scaleReads: slave', () => {
  const READS = ['get', 'hget', 'exists', 'pttl', 'zscore', 'type', 'hgetall', 'zrange', 'mget'];
  let cluster: Cluster;
  let locks: LockClient;

  beforeAll(async () => {
    cluster = new Cluster(sharedTopology('cluster').masters, { scaleReads: 'slave' });
    locks = await createLockClient({
      connection: { type: 'client', client: cluster },
      keyPrefix: `sr-${randomUUID().slice(0, 8)}`,
      logger: quietLogger,
    });
    // A Cluster lists a replica in CLUSTER SLOTS (where ioredis learns of it) once it has replicated
    // something: on a fresh cluster, only after writes or the master's first replication ping.
    const replicated = Array.from({ length: 30 }, (_, i) => `sr-replicated-${i}`);
    await eventually(
      async () => {
        await Promise.all(replicated.map((key) => cluster.set(key, '1', 'PX', 60_000)));
        await new Promise((done) => cluster.refreshSlotsCache(done));
        return cluster.nodes('slave').length === 3;
      },
      30_000,
      500,
    );
  });
  afterAll(async () => {
    await locks.close();
    await cluster.quit();
  });

  /** Read commands the replicas have served so far (replicated writes are not reads). */
  async function readsOnReplicas(): Promise<number> {
    let total = 0;
    const replicas = cluster.nodes('slave');
    expect(replicas).toHaveLength(3);
    for (const replica of replicas) {
      const stats = await replica.info('commandstats');
      for (const command of READS) total += Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    }
    return total;
  }

  it('sends a plain read to a replica (what the engine must not do)', async () => {
    const before = await readsOnReplicas();
    await cluster.get('any');
    expect(await readsOnReplicas()).toBe(before + 1);
  });

  it('reads every kind on the masters, and sees its own writes', () =>
    runInLockScope(async () => {
      const before = await readsOnReplicas();
      const lock = locks.getLock('reads');
      const outer = await lock.lock({ leaseTime: 10_000 });
      const inner = await lock.lock({ leaseTime: 10_000 });
      expect(await lock.isLocked()).toBe(true);
      expect(await lock.getHoldCount()).toBe(2);
      expect(await lock.remainTimeToLive()).toBeGreaterThan(9_000);
      await inner.release();
      await outer.release();
      expect(await lock.isLocked()).toBe(false);

      const fair = locks.getFairLock('reads-fair');
      const fairHold = await fair.lock({ leaseTime: 10_000 });
      expect(await fair.isHeldByCurrentScope()).toBe(true);
      await fairHold.release();

      const simple = locks.getSimpleLock('reads-simple');
      const simpleHold = await simple.lock({ leaseTime: 10_000 });
      expect(await simple.isLocked()).toBe(true);
      // Another kind's hold under the same name is no hold of a reentrant lock (not a WRONGTYPE error).
      expect(await locks.getLock('reads-simple').getHoldCount()).toBe(0);
      await simpleHold.release();

      const rw = locks.getReadWriteLock('reads-rw');
      const write = await rw.writeLock().lock({ leaseTime: 10_000 });
      expect(await rw.writeLock().getHoldCount()).toBe(1);
      await write.release();
      const read = await rw.readLock().lock({ leaseTime: 10_000 });
      expect(await rw.readLock().getHoldCount()).toBe(1);
      await read.release();

      const semaphore = locks.getSemaphore('reads-semaphore', { permits: 2 });
      const permit = await semaphore.acquire({ leaseTime: 10_000 });
      expect(await semaphore.availablePermits()).toBe(1);
      await permit.release();

      expect(await locks.inspect('reads')).toMatchObject({ state: 'free' });
      expect(await readsOnReplicas()).toBe(before);
    }));

  it('asks the master whether an attempt whose reply never came was granted', async () => {
    // What the engine asks after a lost reply (a dropped connection, a failover), per kind.
    type Asks = { grantOfUnknownAttempt(holder: string, holdId: string, leaseMs?: number): Promise<unknown> };
    const before = await readsOnReplicas();
    const lock = locks.getLock('unknown');
    const held = await runInLockScope(() => lock.lock({ leaseTime: 10_000 }), { newScope: true });
    const holder = (await locks.inspect('unknown')).holders[0].owner;
    // The reentrant lock asks by the attempt's hold id (claim-attempt-3.lua), which its handle keeps.
    const { holdId } = held as unknown as { holdId: string };
    expect(await (lock as unknown as Asks).grantOfUnknownAttempt(holder, holdId, 10_000)).toMatchObject({
      fencingToken: held.fencingToken,
    });
    expect(await (lock as unknown as Asks).grantOfUnknownAttempt(holder, 'never-sent', 10_000)).toBeUndefined();
    await held.release();
    expect(await (lock as unknown as Asks).grantOfUnknownAttempt(holder, holdId, 10_000)).toBeUndefined();

    const simple = locks.getSimpleLock('unknown-simple');
    const token = await simple.lock({ leaseTime: 10_000 });
    const simpleHolder = (await locks.inspect('unknown-simple')).holders[0].owner;
    expect(await (simple as unknown as Asks).grantOfUnknownAttempt(simpleHolder, '')).toMatchObject({
      fencingToken: token.fencingToken,
    });
    await token.release();
    expect(await readsOnReplicas()).toBe(before);
  });
});
