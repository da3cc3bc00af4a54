import Redis from 'ioredis';
import { createLockClient, LockClient, type LockClientOptions, type LockHandle } from '../../lib';
import { RedisPubSub } from '../../lib/internal';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { quietLogger, sleep, testPrefix } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';

/**
 * A failover that loses the old master's last writes, made by hand: the client reaches Redis through a
 * proxy; a replica is cut from its master (REPLICAOF NO ONE: it keeps what it had), the master takes
 * one more write, then the proxy drops every connection and sends new ones to the cut replica, as a
 * sentinel's switch to a replica that had not received that write.
 */
const BASE_PORT = PRIVATE_PORTS.failoverReview.base;

describe('failover review: writes the old master acknowledged but never passed on', () => {
  let topology: RunningTopology;
  let proxy: ReplyDroppingProxy | undefined;
  const open: LockClient[] = [];
  const admins: Redis[] = [];

  beforeEach(async () => {
    topology = await startTopology('replica', { basePort: BASE_PORT, name: 'failover-review' });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
    for (const a of admins.splice(0)) a.disconnect();
    await proxy?.close();
    proxy = undefined;
    await stopTopology(topology);
  });

  const admin = (node: { host: string; port: number }) => {
    const redis = new Redis({ ...node, maxRetriesPerRequest: 1 });
    admins.push(redis);
    return redis;
  };

  /**
   * A client that reaches the master through the switching proxy (`options` its own), and a rival
   * connected straight to the replica a failover will promote, both on one key prefix.
   */
  const holderBehindProxyAndRival = async (options: Pick<LockClientOptions, 'replicaSync'> = {}) => {
    const [master] = topology.masters;
    const [promoted] = topology.replicas;
    proxy = await ReplyDroppingProxy.start(master);
    const keyPrefix = testPrefix();
    const locks = await createLockClient({
      connection: { type: 'single', host: '127.0.0.1', port: proxy.port },
      keyPrefix,
      logger: quietLogger,
      ...options,
    });
    const other = await createLockClient({
      connection: { type: 'single', host: promoted.host, port: promoted.port },
      keyPrefix,
      logger: quietLogger,
    });
    open.push(locks, other);
    return { master, promoted, locks, other, keyPrefix, switching: proxy };
  };

  /** A client on `keyPrefix` connected straight to `node` (a holder that stays with the old master). */
  const directClient = async (node: { host: string; port: number }, keyPrefix: string) => {
    const client = await createLockClient({
      connection: { type: 'single', host: node.host, port: node.port },
      keyPrefix,
      logger: quietLogger,
    });
    open.push(client);
    return client;
  };

  /** Every replica stops taking the master's writes and keeps what it had (a failover will promote one). */
  const cutReplicas = () => Promise.all(topology.replicas.map((r) => admin(r).call('REPLICAOF', 'NO', 'ONE')));

  /** The reentrant lock, the fair lock or a read-write lock's read side named `name`. */
  const lockOfKind = (locks: LockClient, kind: 'reentrant' | 'fair' | 'read', name: string) =>
    kind === 'fair'
      ? locks.getFairLock(name)
      : kind === 'read'
        ? locks.getReadWriteLock(name).readLock()
        : locks.getLock(name);

  it.each(['reentrant', 'fair', 'read'] as const)(
    '%s lock: an inner release the old master acknowledged is sent again after the failover, so the outer one frees the lock',
    async (kind) => {
      const { master, promoted, locks, switching } = await holderBehindProxyAndRival();
      const lock = lockOfKind(locks, kind, 'nested');
      const key = `${locks.keyPrefix}:{nested}${kind === 'read' ? ':rw:read' : ''}`;
      const onMaster = admin(master);
      const onPromoted = admin(promoted);

      const outer = await lock.lock({ owner: 'job' });
      const inner = await lock.lock({ owner: 'job' });
      expect(inner.holdCount).toBe(2);
      // The replica has both holds, then is cut from its master: it keeps them.
      await onMaster.call('WAIT', 3, 1_000);
      await onPromoted.call('REPLICAOF', 'NO', 'ONE');
      expect(await inner.release()).toBe('decremented'); // on the old master only

      switching.switchTo(promoted);
      // Back, on the promoted replica.
      for (let i = 0; i < 100 && !(await lock.isLocked().catch(() => false)); i++) await sleep(20);
      await sleep(200);

      expect(await outer.release()).toBe('released');
      // No hold is left on the master that serves the lock now: it is free at once, not after a lease.
      expect(await onPromoted.exists(key)).toBe(0);
    },
    30_000,
  );

  it('an extension the old master acknowledged, its replicas not yet, is not believed until the master serving the lock now has it', async () => {
    const { master, promoted, locks, other, keyPrefix, switching } = await holderBehindProxyAndRival();
    const onMaster = admin(master);

    const handle = await locks.getLock('extended').lock({ leaseTime: 1_500 });
    // Every replica has the grant, then none takes the master's writes any more.
    await onMaster.call('WAIT', 3, 1_000);
    await cutReplicas();
    const extended = handle.extend(20_000).then(
      () => 'extended',
      (error: Error) => error.name,
    );
    await sleep(100);
    // The old master dies before a replica has the extension: the promoted one has the 1.5 s lease.
    switching.switchTo(promoted);
    await extended;

    // Past the promoted master's 1.5 s lease: another client may take the lock only if the holder knows it lost it.
    const taken = await other.getLock('extended').tryLock({ waitTime: 3_000, leaseTime: 5_000 });
    const holderBelieves = !handle.signal.aborted;
    const ttlNow = await admin(promoted).pttl(`${keyPrefix}:{extended}`);
    await taken?.release();
    expect({ taken: taken !== null, holderBelieves }).not.toEqual({ taken: true, holderBelieves: true });
    // A holder that still believes has the extension on the master that serves the lock now.
    if (holderBelieves) expect(ttlNow).toBeGreaterThan(10_000);
  }, 30_000);

  it.each([0, 1_000])(
    "tryLock({ waitTime: %d }) of an owner whose release is still being sent through an outage ends within its bounds, not the release's lease",
    async (waitTime) => {
      const [master] = topology.masters;
      const partition = await ReplyDroppingProxy.start(master);
      const locks = await createLockClient({
        connection: { type: 'single', host: '127.0.0.1', port: partition.port, commandTimeout: 500 },
        keyPrefix: testPrefix(),
        operationTimeout: 500,
        logger: quietLogger,
      });
      open.push(locks);
      try {
        const lock = locks.getLock('pending');
        const handle = await lock.lock({ owner: 'job', leaseTime: 20_000 });
        partition.cutOff(true); // Redis out of reach; the connection stays open
        expect(await handle.release()).toBe('pending'); // sent again until it lands or the lease ends

        const startedAt = Date.now();
        const outcome = await Promise.race([
          lock.tryLock({ owner: 'job', waitTime }).then(
            (h) => (h ? 'acquired' : 'not acquired'),
            (error: Error) => error.name,
          ),
          sleep(10_000).then(() => 'still waiting after 10 s'),
        ]);
        const tookMs = Date.now() - startedAt;
        expect(outcome).toBe('RedisUnavailableError');
        // Its wait, plus what a wait tolerates of an outage (one operationTimeout), and some slack.
        expect(tookMs).toBeLessThan(waitTime + 500 + 1_000);
      } finally {
        partition.cutOff(false);
        await partition.close();
      }
    },
    30_000,
  );

  it.each(['reentrant', 'fair', 'read'] as const)(
    '%s lock: a re-entry the failover lost is released without telling the holder it lost the outer hold Redis still has',
    async (kind) => {
      const { master, promoted, locks, switching } = await holderBehindProxyAndRival();
      const lock = lockOfKind(locks, kind, 'lost-entry');
      const onMaster = admin(master);
      const onPromoted = admin(promoted);

      const outer = await lock.lock({ owner: 'job' });
      await onMaster.call('WAIT', 3, 1_000);
      await onPromoted.call('REPLICAOF', 'NO', 'ONE');
      const inner = await lock.lock({ owner: 'job' }); // on the old master only
      expect(inner.holdCount).toBe(2);

      switching.switchTo(promoted);
      for (let i = 0; i < 100 && !(await lock.isLocked().catch(() => false)); i++) await sleep(20);

      await inner.release().catch(() => undefined);
      // The outer hold is Redis's still: the holder goes on, and its release frees the lock.
      const key = `${locks.keyPrefix}:{lost-entry}${kind === 'read' ? ':rw:read' : ''}`;
      if (kind === 'read') expect(await onPromoted.zscore(key, 'job')).not.toBeNull();
      else expect(await onPromoted.hexists(key, 'job')).toBe(1);
      expect(outer.signal.aborted).toBe(false);
      expect(await outer.release()).toBe('released');
      expect(await onPromoted.exists(key)).toBe(0);
    },
    30_000,
  );

  it('a re-entry that lengthened the lease, lost in a failover before a replica had it, is not believed', async () => {
    const { master, promoted, locks, other, keyPrefix, switching } = await holderBehindProxyAndRival();
    const onMaster = admin(master);
    const lock = locks.getLock('longer');
    const outer = await lock.lock({ owner: 'job', leaseTime: 1_500 });
    await onMaster.call('WAIT', 3, 1_000);
    await cutReplicas();
    const inner = lock.lock({ owner: 'job', leaseTime: 20_000, waitTime: 5_000 }).then(
      (h) => h,
      () => undefined,
    );
    await sleep(100);
    // The old master dies before a replica has the re-entry: the promoted one has the 1.5 s lease.
    switching.switchTo(promoted);
    await inner;
    // Past the promoted master's 1.5 s lease: another client may take the lock only if the holder knows it lost it.
    const taken = await other.getLock('longer').tryLock({ waitTime: 3_000, leaseTime: 5_000 });
    const holderBelieves = !outer.signal.aborted;
    const ttlNow = await admin(promoted).pttl(`${keyPrefix}:{longer}`);
    await taken?.release();
    expect({ taken: taken !== null, holderBelieves }).not.toEqual({ taken: true, holderBelieves: true });
    // A holder that still believes has the longer lease on the master that serves the lock now.
    if (holderBelieves) expect(ttlNow).toBeGreaterThan(10_000);
  }, 30_000);

  it("replicaSync { onFailure: 'warn' }: a grant whose master stopped answering before a replica had it is not kept on trust", async () => {
    const { promoted, locks, other, switching } = await holderBehindProxyAndRival({
      replicaSync: { replicas: 1, timeout: 2_000, onFailure: 'warn' },
    });
    // No replica takes the master's writes any more: the grant below stays on the old master.
    await cutReplicas();
    const granted = locks
      .getLock('warned')
      .lock({ leaseTime: 20_000, waitTime: 5_000 })
      .then(
        (h) => h,
        () => undefined,
      );
    await sleep(100);
    // The old master dies while WAIT waits for a replica.
    switching.switchTo(promoted);
    const handle = await granted;

    const taken = await other.getLock('warned').tryLock({ waitTime: 0, leaseTime: 5_000 });
    const holderBelieves = handle !== undefined && !handle.signal.aborted;
    await taken?.release();
    expect({ taken: taken !== null, holderBelieves }).not.toEqual({ taken: true, holderBelieves: true });
  }, 30_000);

  it("write lock: a grant lost in a failover is waited for again as the same wait, so that wait's intent goes with the new grant", async () => {
    const { master, promoted, locks, other, keyPrefix, switching } = await holderBehindProxyAndRival();
    const onMaster = admin(master);
    const onPromoted = admin(promoted);
    const reader = await directClient(master, keyPrefix);
    const rw = locks.getReadWriteLock('intent', { writerIntentTimeout: 30_000 });
    const { writers, write } = rw.keys;
    // A grant of the writer's client reads the master's replicas: its next grant waits for one.
    await (await locks.getReadWriteLock('warm-up').writeLock().lock()).release();
    const read = await reader.getReadWriteLock('intent').readLock().lock({ owner: 'reader', leaseTime: 3_000 });
    const writing = rw.writeLock().lock({ waitTime: 20_000 });
    writing.catch(() => undefined);
    for (let i = 0; i < 100 && (await onMaster.zcard(writers)) === 0; i++) await sleep(20);
    // The replicas have the read hold and the writer's intent, then take no more of the master's writes.
    await onMaster.call('WAIT', 3, 1_000);
    expect(await onPromoted.zcard(writers)).toBe(1);
    await cutReplicas();
    // The reader leaves on the old master only: the writer is granted there, and waits for a replica.
    expect(await read.release()).toBe('released');
    for (let i = 0; i < 100 && (await onMaster.exists(write)) === 0; i++) await sleep(10);
    expect(await onMaster.exists(write)).toBe(1);
    // The old master dies before a replica has the grant.
    switching.switchTo(promoted);
    // Granted again on the promoted master, once the read hold it still has ran out.
    const handle = await writing;
    expect(await onPromoted.hexists(write, handle.owner)).toBe(1);
    // The wait is over: it leaves no intent behind to hold readers back once the writer is gone.
    expect(await onPromoted.zrange(writers, 0, -1)).toEqual([]);
    expect(await handle.release()).toBe('released');
    const next = await other.getReadWriteLock('intent').readLock().tryLock();
    expect(next).not.toBeNull();
    await next?.release();
  }, 30_000);

  it("fair lock: a grant lost in a failover is waited for again as the same wait, keeping that wait's place at the head of the queue", async () => {
    const { master, promoted, locks, other, keyPrefix, switching } = await holderBehindProxyAndRival();
    const onMaster = admin(master);
    const onPromoted = admin(promoted);
    const holder = await directClient(master, keyPrefix);
    // A wait that came back under a new id would queue behind its own old place on the promoted master,
    // which is kept for 30 s, or handed the lock for an acceptance lease of 10 s (nobody takes it) first.
    const fair = locks.getFairLock('queued', { staleWaiterTimeout: 30_000, acceptanceLease: 10_000 });
    const { lock: lockKey, queue, deadlines } = fair.keys;
    // A grant of the waiter's client reads the master's replicas: its next grant waits for one.
    await (await locks.getFairLock('warm-up').lock()).release();
    const held = await holder.getFairLock('queued').lock({ owner: 'holder', leaseTime: 3_000 });
    const waiting = fair.lock({ waitTime: 20_000 });
    waiting.catch(() => undefined);
    for (let i = 0; i < 100 && (await onMaster.llen(queue)) === 0; i++) await sleep(20);
    // The replicas have the hold and the waiter's place, then take no more of the master's writes.
    await onMaster.call('WAIT', 3, 1_000);
    expect(await onPromoted.lrange(queue, 0, -1)).toHaveLength(1);
    await cutReplicas();
    // The holder leaves on the old master only: the lock is handed to the waiter there, which accepts it
    // (its lease past the hand-over's acceptance lease) and waits for a replica.
    expect(await held.release()).toBe('released');
    for (let i = 0; i < 200 && (await onMaster.pttl(lockKey)) < 2_000; i++) await sleep(10);
    expect(await onMaster.pttl(lockKey)).toBeGreaterThan(2_000);
    // The old master dies before a replica has the hand-over.
    switching.switchTo(promoted);
    const switchedAt = Date.now();
    // Granted again on the promoted master once the holder's lease (3 s at most) ran out there, from the
    // head of the queue: not 10 s later.
    const handle = await waiting;
    expect(Date.now() - switchedAt).toBeLessThan(9_000);
    expect(await onPromoted.hexists(lockKey, handle.owner)).toBe(1);
    expect(await onPromoted.hexists(lockKey, 'holder')).toBe(0);
    // The wait is over: no place of it is left to hold the next waiters back.
    expect(await onPromoted.lrange(queue, 0, -1)).toEqual([]);
    expect(await onPromoted.zcard(deadlines)).toBe(0);
    expect(await handle.release()).toBe('released');
    const next = await other.getFairLock('queued').tryLock();
    expect(next).not.toBeNull();
    await next?.release();
  }, 40_000);

  it('semaphore: permits lost in a failover are waited for again by the same acquisition, keeping its place in the queue', async () => {
    const { master, promoted, locks, other, keyPrefix, switching } = await holderBehindProxyAndRival();
    const onMaster = admin(master);
    const onPromoted = admin(promoted);
    const holder = await directClient(master, keyPrefix);
    const pool = locks.getSemaphore('pool', { permits: 1, staleWaiterTimeout: 30_000 });
    const { holds, waiting: queue } = pool.keys;
    // A grant of the waiter's client reads the master's replicas: its next grant waits for one.
    await (await locks.getSemaphore('warm-up', { permits: 1 }).acquire()).release();
    const held = await holder.getSemaphore('pool', { permits: 1 }).acquire({ leaseTime: 3_000 });
    const waiting = pool.acquire({ waitTime: 20_000 });
    waiting.catch(() => undefined);
    for (let i = 0; i < 100 && (await onMaster.zcard(queue)) === 0; i++) await sleep(20);
    const [entry] = await onMaster.zrange(queue, 0, -1);
    // '<length of client id>:<client id><hold member>' (lua/include/semaphore-queue.lua)
    const cut = entry.indexOf(':');
    const member = entry.slice(cut + 1 + Number(entry.slice(0, cut)));
    // The replicas have the hold and the waiter's place, then take no more of the master's writes.
    await onMaster.call('WAIT', 3, 1_000);
    expect(await onPromoted.zrange(queue, 0, -1)).toEqual([entry]);
    await cutReplicas();
    // The holder leaves on the old master only: its permit is handed to the waiter there, which claims it
    // (its lease past the hand-over's acceptance lease) and waits for a replica.
    expect(await held.release()).toBe('released');
    const leaseLeft = async () => {
      const [expiry, [seconds, micros]] = await Promise.all([onMaster.zscore(holds, member), onMaster.time()]);
      return expiry === null ? 0 : Number(expiry) - (Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000));
    };
    for (let i = 0; i < 200 && (await leaseLeft()) < 2_000; i++) await sleep(10);
    expect(await leaseLeft()).toBeGreaterThan(2_000);
    // The old master dies before a replica has the claim.
    switching.switchTo(promoted);
    // Granted on the promoted master once the holder's lease ran out there: to the acquisition's first
    // member, from its place at the head of the queue (under a new member the old place came first).
    const handle = await waiting;
    expect(await onPromoted.zscore(holds, member)).not.toBeNull();
    expect(await onPromoted.zcard(holds)).toBe(1);
    expect(await onPromoted.zrange(queue, 0, -1)).toEqual([]);
    expect(await handle.release()).toBe('released');
    const next = await other.getSemaphore('pool', { permits: 1 }).tryAcquire();
    expect(next).not.toBeNull();
    await next?.release();
  }, 40_000);

  it.each([
    ['its own subscriber, moved along with the commands', true],
    ['a subscriber lent to it, left where it is', false],
  ] as const)(
    'fair lock, %s: a hand-over told by the old master (alive behind a partition) after the commands moved to the promoted one is not believed',
    async (_how, ownSubscriber) => {
      const [master] = topology.masters;
      const [promoted] = topology.replicas;
      const keyPrefix = testPrefix();
      // The waiter's commands and its subscriber reach the master on connections of their own, so that
      // a switch can move the commands while the subscriber stays on the old master.
      const commands = await ReplyDroppingProxy.start(master);
      const subscriber = await ReplyDroppingProxy.start(master);
      const waiterRedis = new Redis({ host: '127.0.0.1', port: commands.port, maxRetriesPerRequest: 1 });
      const subscriberRedis = new Redis({ host: '127.0.0.1', port: subscriber.port, maxRetriesPerRequest: null });
      try {
        const waiter = new LockClient({
          redis: waiterRedis,
          pubsub: new RedisPubSub(subscriberRedis, false, ownSubscriber),
          keyPrefix,
          replicaSync: false, // nothing vouches for a grant but its master's word
          logger: quietLogger,
        });
        const holder = await createLockClient({
          connection: { type: 'single', host: master.host, port: master.port },
          keyPrefix,
          replicaSync: false,
          logger: quietLogger,
        });
        open.push(waiter, holder);
        const options = { staleWaiterTimeout: 1_500 }; // the waiter retries every 500 ms
        const onMaster = admin(master);
        const onPromoted = admin(promoted);
        const keys = holder.getFairLock('partitioned', options).keys;

        const held = await holder.getFairLock('partitioned', options).lock();
        const waiting = waiter.getFairLock('partitioned', options).lock({ waitTime: 20_000 });
        waiting.catch(() => undefined);
        for (let i = 0; i < 100 && (await onMaster.llen(keys.queue)) === 0; i++) await sleep(20);
        // The replicas have the hold and the queue, then take no more of the master's writes.
        await onMaster.call('WAIT', 3, 1_000);
        await cutReplicas();
        const [, before] = await onPromoted.zrange(keys.deadlines, 0, 0, 'WITHSCORES');

        // The waiter's commands move to the promoted replica; its subscriber stays on the old master
        // (a reconnect of its own would reach the promoted one, as a sentinel would say).
        subscriber.retarget(promoted);
        commands.switchTo(promoted);
        // Its wait has been refused on the promoted master since (its deadline there moved).
        for (let i = 0; i < 200; i++) {
          const [, now] = await onPromoted.zrange(keys.deadlines, 0, 0, 'WITHSCORES');
          if (Number(now) > Number(before)) break;
          await sleep(20);
        }

        // The holder, still on the old master, releases: the old master hands the lock to the waiter.
        await held.release();
        const granted = await Promise.race([waiting, sleep(3_000).then(() => undefined)]);
        // Believed only if the master that serves the lock now has it.
        const believed = granted !== undefined && !(granted as LockHandle).signal.aborted;
        const onServingMaster = granted ? await onPromoted.hexists(keys.lock, granted.owner) : 0;
        expect({ believed, onServingMaster }).not.toEqual({ believed: true, onServingMaster: 0 });
      } finally {
        await commands.close();
        await subscriber.close();
        waiterRedis.disconnect();
        subscriberRedis.disconnect();
      }
    },
    30_000,
  );
});
