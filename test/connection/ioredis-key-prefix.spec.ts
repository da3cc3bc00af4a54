import { randomUUID } from 'node:crypto';
import Redis, { Cluster } from 'ioredis';
import { createLockClient, LockClient, LockOptionsError, runInLockScope, type LockHandle } from '../../lib';
import { clusterSlot } from '../../lib/engine/redis/cluster-slot';
import { quietLogger, sleep } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * An application's own ioredis client often carries a `keyPrefix` (one namespace per service on a
 * shared Redis). ioredis puts it before every key a command names, so before every lock key, and the
 * scripts publish each release on a channel named after those keys; but it puts nothing before a
 * classic SUBSCRIBE's channel, and a message names its channel in full. The waiters must listen on,
 * and recognise, the prefixed channel, or every hand-over falls back on a waiter's timer (a second
 * or more per release).
 */

const single = () => sharedTopology('single').masters[0];
const clusterNodes = () => sharedTopology('cluster').masters;

/** Each kind: how to take it, with the options a waiter and a holder pass. */
const KINDS: [kind: string, take: (c: LockClient, name: string, o: object) => Promise<LockHandle>][] = [
  ['reentrant', (c, name, o) => c.getLock(name).lock(o)],
  ['fair', (c, name, o) => c.getFairLock(name).lock(o)],
  ['simple', (c, name, o) => c.getSimpleLock(name).lock(o)],
  ['write', (c, name, o) => c.getReadWriteLock(name).writeLock().lock(o)],
  ['read after write', (c, name, o) => c.getReadWriteLock(name).readLock().lock(o)],
  ['semaphore', (c, name, o) => c.getSemaphore(name, { permits: 1 }).acquire(o)],
];

/** What a 'read after write' waiter waits behind: the write lock of the same name. */
const holderOf = (kind: string) => KINDS.find(([k]) => k === (kind === 'read after write' ? 'write' : kind))![1];

/** Takes a lock with `hold`, starts `wait` for it, releases, and checks that the release woke the waiter. */
async function expectReleaseWakesWaiter(hold: () => Promise<LockHandle>, wait: () => Promise<LockHandle>) {
  const held = await hold();
  const waiting = wait();
  await sleep(300);
  const releasedAt = Date.now();
  await held.release();
  const next = await waiting;
  // Woken by the release's message. Without it a waiter re-checks on its own a second after it
  // started waiting: about 700 ms after this release.
  expect(Date.now() - releasedAt).toBeLessThan(450);
  expect(await next.release()).toBe('released');
}

describe.each([
  ['an ioredis client', 'app:', () => new Redis({ ...single(), keyPrefix: 'app:' })],
  ['an ioredis Cluster', 'app:', () => new Cluster(clusterNodes(), { keyPrefix: 'app:' })],
  ['an ioredis Cluster, hash-tagged', '{app}:', () => new Cluster(clusterNodes(), { keyPrefix: '{app}:' })],
])('%s with keyPrefix %s', (_label, ioPrefix, make) => {
  const prefix = `kp-${randomUUID().slice(0, 8)}`;
  let holderClient: Redis | Cluster;
  let waiterClient: Redis | Cluster;
  let holder: LockClient;
  let waiter: LockClient;

  beforeAll(async () => {
    [holderClient, waiterClient] = [make(), make()];
    // Two lock clients: a release reaches the waiter only through Redis, as between two processes.
    holder = await createLockClient({
      connection: { type: 'client', client: holderClient },
      keyPrefix: prefix,
      logger: quietLogger,
    });
    waiter = await createLockClient({
      connection: { type: 'client', client: waiterClient },
      keyPrefix: prefix,
      logger: quietLogger,
    });
  });
  afterAll(async () => {
    await Promise.all([holder.close(), waiter.close()]);
    await Promise.all([holderClient.quit(), waiterClient.quit()]);
  });

  it('keeps the lock keys under the ioredis prefix', async () => {
    const held = await holder.getLock('where').lock({ leaseTime: 20_000 });
    const plain = holderClient.isCluster ? new Cluster(clusterNodes()) : new Redis(single());
    try {
      expect(await plain.exists(`${ioPrefix}${prefix}:{where}`)).toBe(1);
      expect(await plain.exists(`${prefix}:{where}`)).toBe(0);
      // inspect() names the key as Redis does.
      expect((await holder.inspect('where')).key).toBe(`${ioPrefix}${prefix}:{where}`);
    } finally {
      await held.release();
      plain.disconnect();
    }
  });

  it.each(KINDS.map(([kind]) => kind))("%s: a release wakes the other client's waiter at once", async (kind) => {
    const name = `wake-${kind.replace(/ /g, '-')}`;
    await expectReleaseWakesWaiter(
      () => holderOf(kind)(holder, name, { leaseTime: 20_000 }),
      () => KINDS.find(([k]) => k === kind)![1](waiter, name, { waitTime: 15_000, leaseTime: 20_000 }),
    );
  });

  it('a hot key changes hands between the two clients without waiting out timers', async () => {
    // Passing the key on wakes the other client and reserves the key for it for 50 ms. Should it not
    // hear the message, it takes the key once the reservation lapses: an upper quartile of 25-40 ms
    // (measured so), against a few ms when it hears. A machine slowed by the specs beside this one
    // stretches hand-overs too, so a round that misses is measured again (at most five), a second
    // later: CI once saw three rounds in a row at 19 ms, all within one busy neighbour's few seconds.
    const rounds: { count: number; upperQuartile: number }[] = [];
    while (rounds.length < 5 && (rounds.length === 0 || rounds.at(-1)!.upperQuartile >= 15)) {
      if (rounds.length > 0) await sleep(1_000);
      rounds.push(await measureHandOvers());
    }
    // Every round in the message: one slow round among fast ones is load, all slow is a fault.
    const last = rounds.at(-1)!;
    if (last.count < HAND_OVERS || last.upperQuartile >= 15) throw new Error(`rounds: ${JSON.stringify(rounds)}`);
  });

  const HAND_OVERS = 40;

  /**
   * Two loops on each client take the key until it has changed clients HAND_OVERS times (within 15 s).
   * A hand-over lasts from the start of the release that passed the key on to the other client's grant.
   */
  async function measureHandOvers(): Promise<{ count: number; upperQuartile: number }> {
    const handOvers: number[] = [];
    let last: { locks: LockClient; releasingAt: number } | undefined;
    const until = Date.now() + 15_000;
    const loop = (locks: LockClient) =>
      runInLockScope(
        async () => {
          while (handOvers.length < HAND_OVERS && Date.now() < until) {
            const handle = await locks.getLock('hot').lock({ waitTime: 5_000 });
            if (last && last.locks !== locks) handOvers.push(Date.now() - last.releasingAt);
            last = { locks, releasingAt: Date.now() };
            await handle.release();
          }
        },
        { newScope: true },
      );
    await Promise.all([loop(holder), loop(waiter), loop(holder), loop(waiter)]);
    const sorted = handOvers.sort((a, b) => a - b);
    return { count: sorted.length, upperQuartile: sorted[Math.floor(sorted.length * 0.75)] ?? Infinity };
  }
});

describe.each([
  ['single', () => ({ type: 'single' as const, ...single(), redisOptions: { keyPrefix: 'own:' } })],
  ['cluster', () => ({ type: 'cluster' as const, nodes: clusterNodes(), clusterOptions: { keyPrefix: 'own:' } })],
])('our own %s connections with an ioredis keyPrefix', (_type, connection) => {
  it('put it before the keys, and wake a waiter at once', async () => {
    const keyPrefix = `kp-${randomUUID().slice(0, 8)}`;
    const [holder, waiter] = await Promise.all(
      [0, 1].map(() => createLockClient({ connection: connection(), keyPrefix, logger: quietLogger })),
    );
    try {
      const plain = holder.redis.isCluster ? new Cluster(clusterNodes()) : new Redis(single());
      const hold = async () => {
        const held = await holder.getLock('own').lock({ leaseTime: 20_000 });
        expect(await plain.exists(`own:${keyPrefix}:{own}`)).toBe(1);
        return held;
      };
      try {
        await expectReleaseWakesWaiter(hold, () => waiter.getLock('own').lock({ waitTime: 10_000 }));
      } finally {
        plain.disconnect();
      }
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });
});

describe('an ioredis Cluster with a keyPrefix', () => {
  it('replica sync WAITs on the master that holds the prefixed keys', async () => {
    // Other specs lock on this Cluster at the same time, and their replica syncs WAIT too: only this
    // client's WAITs count, told by its connections' name (CLIENT LIST) and address (MONITOR).
    const connectionName = `kp-${randomUUID().slice(0, 8)}`;
    const cluster = new Cluster(clusterNodes(), { keyPrefix: '{app}:', redisOptions: { connectionName } });
    const locks = await createLockClient({
      connection: { type: 'client', client: cluster },
      keyPrefix: `kp-${randomUUID().slice(0, 8)}`,
      logger: quietLogger,
    });
    const monitors: Redis[] = [];
    try {
      await cluster.ping();
      const masterOf = (key: string) => cluster.slots[clusterSlot(key)][0];
      // A name whose own hash tag lives on another master than the prefix's: the keys live with '{app}'.
      let name = '';
      for (let i = 0; !name; i++) {
        const candidate = `elsewhere-${i}`;
        if (masterOf(candidate) !== masterOf('app')) name = candidate;
      }
      const masters = await Promise.all(
        cluster.nodes('master').map(async (node) => {
          const { host, port } = node.options;
          const admin = new Redis({ host, port });
          const monitor = await admin.monitor(); // a connection of its own
          admin.disconnect();
          monitors.push(monitor);
          const waitsFrom: string[] = [];
          monitor.on('monitor', (_time: string, args: string[], source: string) => {
            if (args[0]?.toLowerCase() === 'wait') waitsFrom.push(source);
          });
          return { address: `${host}:${port}`, node, waitsFrom };
        }),
      );
      const handle = await locks.getLock(name).lock({ leaseTime: 10_000 });
      await sleep(200); // the monitors' copies of the commands are on their way
      const waitedOn: string[] = [];
      for (const { address, node, waitsFrom } of masters) {
        const ours = String(await node.client('LIST'))
          .split('\n')
          .filter((line) => line.includes(` name=${connectionName} `))
          .map((line) => /\baddr=(\S+)/.exec(line)![1]);
        if (waitsFrom.some((source) => ours.includes(source))) waitedOn.push(address);
      }
      await handle.release();
      expect(waitedOn).toEqual([masterOf('app')]);
    } finally {
      for (const monitor of monitors) monitor.disconnect();
      await locks.close();
      await cluster.quit();
    }
  });

  it('the watchdog renews locks whose keys share a slot only with the prefix', async () => {
    // 'a{' opens a hash tag that the lock key closes: the slot of `a{<prefix>:{name}` is that of
    // `<prefix>:{name`, unrelated to the slot of `name`. Renewals grouped by the slot of `name`
    // would send keys of two slots in one script call.
    const cluster = new Cluster(clusterNodes(), { keyPrefix: 'a{' });
    const keyPrefix = `kp-${randomUUID().slice(0, 8)}`;
    const locks = await createLockClient({
      connection: { type: 'client', client: cluster },
      keyPrefix,
      watchdogTimeout: 900,
      logger: quietLogger,
    });
    try {
      const names = ['w-0'];
      for (let i = 0; names.length < 4; i++) if (clusterSlot(`w-x${i}`) === clusterSlot('w-0')) names.push(`w-x${i}`);
      expect(new Set(names.map((n) => clusterSlot(`a{${keyPrefix}:{${n}}`))).size).toBeGreaterThan(1);
      const lost: unknown[] = [];
      locks.on('lockLost', (error) => lost.push(error));
      const held = await Promise.all(names.map((n) => locks.getLock(n).lock()));
      await sleep(3 * 900);
      expect(lost).toEqual([]);
      for (const [i, n] of names.entries()) {
        expect(held[i].isLost).toBe(false);
        expect(await locks.getLock(n).remainTimeToLive()).toBeGreaterThan(0);
      }
      expect(await Promise.all(held.map((h) => h.release()))).toEqual(names.map(() => 'released'));
    } finally {
      await locks.close();
      await cluster.quit();
    }
  });

  it('refuses, before any lock, a subscriber that could not hear the releases', async () => {
    const client = new Cluster(clusterNodes(), { keyPrefix: 'app:' });
    const subscriber = new Cluster(clusterNodes(), { keyPrefix: 'other:', shardedSubscribers: true });
    try {
      const made = createLockClient({ connection: { type: 'client', client, subscriber }, logger: quietLogger });
      await expect(made).rejects.toThrow(LockOptionsError);
      await expect(made).rejects.toThrow(/keyPrefix "other:" does not begin the lock connection's \("app:"\)/);
      // A subscriber without a prefix hears them: ioredis adds nothing, the channel is given in full.
      subscriber.disconnect();
      const plain = new Cluster(clusterNodes(), { shardedSubscribers: true });
      const holderLocks = await createLockClient({ connection: { type: 'client', client }, logger: quietLogger });
      const waiterLocks = await createLockClient({
        connection: { type: 'client', client, subscriber: plain },
        logger: quietLogger,
      });
      try {
        await expectReleaseWakesWaiter(
          () => holderLocks.getLock('heard').lock({ leaseTime: 20_000 }),
          () => waiterLocks.getLock('heard').lock({ waitTime: 10_000 }),
        );
      } finally {
        await Promise.all([holderLocks.close(), waiterLocks.close()]);
        plain.disconnect();
      }
    } finally {
      subscriber.disconnect();
      await client.quit();
    }
  });
});
