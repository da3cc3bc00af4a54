import Redis from 'ioredis';
import { LockClient, LockQuorumError, RedLock } from '../../lib';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { eventually, lockClient, quietLogger, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { killAll, startTogether, startWorker, type Worker } from '../support/workers';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/** RedLock over five independent masters. Killing masters happens on a private topology (7230). */
describe('RedLock', () => {
  const prefix = testPrefix();
  let counterClient: TestClient;
  const workers: Worker[] = [];

  const clientsFor = (ports: number[], operationTimeout = 500) =>
    ports.map(
      (port) =>
        new LockClient({
          redis: new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 }),
          keyPrefix: prefix,
          operationTimeout,
          logger: quietLogger,
        }),
    );
  const closeAll = async (clients: LockClient[]) => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    clients.forEach((c) => (c.redis as Redis).disconnect());
  };
  const racers = async (ports: number[], name: string, durationMs: number) => {
    const env = {
      REDIS_PORT: singlePort(), // the counter lives in the main Redis, as in the seed
      REDLOCK_PORTS: ports.join(','),
      KEY_PREFIX: prefix,
      LOCK_KIND: 'redlock',
      LOCK_NAME: name,
      COUNTER_KEY: `${prefix}:counter:${name}`,
      TOKENS_KEY: `${prefix}:tokens:${name}`,
      START_AT: 'signal',
      DURATION_MS: durationMs,
    };
    const procs = Array.from({ length: 8 }, () => startWorker('racy-counter.ts', env));
    workers.push(...procs);
    const startAt = await startTogether(procs);
    return { procs, counterKey: env.COUNTER_KEY, startAt };
  };
  const total = async (procs: Worker[]) =>
    ((await Promise.all(procs.map((w) => w.result))) as { increments: number }[]).reduce((s, r) => s + r.increments, 0);

  beforeAll(() => (counterClient = lockClient({ keyPrefix: prefix })));
  afterEach(() => killAll(workers.splice(0)));
  afterAll(() => counterClient.close());

  it('holds on a majority with a validity below the lease, and releases everywhere', async () => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const clients = clientsFor(ports);
    try {
      const redLock = new RedLock(clients, 'validity');
      expect(redLock.quorum).toBe(3);
      // Connected first: a vote bounded in time must not lose its round to a slow connect on a busy machine.
      await Promise.all(clients.map((c) => c.redis.ping()));
      const handle = await redLock.lock({ leaseTime: 10_000 });
      expect(handle.validity).toBeGreaterThan(9_000);
      expect(handle.validity).toBeLessThanOrEqual(10_000 - 102); // drift = 1% of the lease + 2 ms
      const keys = clients.map((c) => c.getLock('validity').keys.lock);
      const holding = async () => (await Promise.all(clients.map((c, i) => c.redis.exists(keys[i])))).join(' ');
      // Decided at the quorum: the grants that land later (a first call may go EVALSHA, NOSCRIPT, EVAL) join it.
      await eventually(async () => (await holding()) === '1 1 1 1 1', 2_000);
      expect(await new RedLock(clients, 'validity').tryLock()).toBeNull(); // another owner
      await handle.extend(20_000);
      expect(handle.validity).toBeGreaterThan(19_000);
      expect(await handle.release()).toBe('released');
      // Answered at the quorum: the other masters' releases land in the background.
      await eventually(async () => (await holding()) === '0 0 0 0 0', 2_000);
    } finally {
      await closeAll(clients);
    }
  });

  it('a lease past what setTimeout can wait (2^31 ms) is not reported as ended 1 ms in', async () => {
    const clients = clientsFor(sharedTopology('multi').masters.map((m) => m.port));
    try {
      const handle = await new RedLock(clients, 'long-lease').lock({ leaseTime: 2 ** 31 + 1_000 });
      await sleep(50);
      expect(handle.signal.aborted).toBe(false);
      expect(handle.validity).toBeGreaterThan(2 ** 31 - 30_000_000); // drift: 1% of the lease
      expect(await handle.release()).toBe('released');
    } finally {
      await closeAll(clients);
    }
  });

  it('a stale key on the gate master holds a waiting contender back one instance timeout, not the rest of its lease', async () => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const holderClients = clientsFor(ports);
    const waiterClients = clientsFor(ports);
    const name = 'stale-gate';
    try {
      await Promise.all([...holderClients, ...waiterClients].map((c) => c.redis.ping()));
      const keys = holderClients.map((c) => c.getLock(name).keys.lock);
      const holding = async () => (await Promise.all(holderClients.map((c, i) => c.redis.exists(keys[i])))).join(' ');
      const holder = await new RedLock(holderClients, name).lock({ leaseTime: 30_000 });
      await eventually(async () => (await holding()) === '1 1 1 1 1', 2_000);
      const waiting = new RedLock(waiterClients, name).lock({ leaseTime: 30_000, waitTime: 20_000 });
      await sleep(400); // refused everywhere, then at the gate: it waits for a release
      // A contender that crashed mid-round left its key on the gate (the first master) for a whole lease.
      await holderClients[0].redis.set(keys[0], 'crashed-contender', 'PX', 30_000);
      const releasedAt = Date.now();
      expect(await holder.release()).toBe('released'); // on the four others
      const handle = await waiting;
      // The instance timeout is 250 ms here (lease / 20, at most 250): well under the stale key's 30 s.
      expect(Date.now() - releasedAt).toBeLessThan(3_000);
      expect(handle.handles[0]).toBeNull();
      expect(await holderClients[0].redis.get(keys[0])).toBe('crashed-contender');
      expect(await handle.release()).toBe('released');
    } finally {
      await holderClients[0].redis.del(holderClients[0].getLock(name).keys.lock);
      await closeAll([...holderClients, ...waiterClients]);
    }
  }, 60_000);

  it('8 processes incrementing a racy counter lose no update', async () => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const { procs, counterKey } = await racers(ports, 'race', 3_000);
    const count = await total(procs);
    expect(count).toBeGreaterThan(0);
    expect(Number(await counterClient.redis.get(counterKey))).toBe(count);
  }, 60_000);

  describe('when masters die', () => {
    let topology: RunningTopology;
    let ports: number[];

    beforeAll(async () => {
      topology = await startTopology('multi', { basePort: PRIVATE_PORTS.redLock.base });
      ports = topology.masters.map((m) => m.port);
    }, 60_000);
    afterAll(async () => {
      if (topology) await stopTopology(topology);
    });

    it('2 of 5 killed mid-run: acquisitions go on and no update is lost; 3 of 5: a typed quorum error within the wait, no partial lock left', async () => {
      const { procs, counterKey, startAt } = await racers(ports, 'kill', 4_000);
      await sleep(startAt - Date.now() + 1_500);
      const before = Number(await counterClient.redis.get(counterKey));
      await signalNode(topology, ports[0], 'SIGKILL');
      await signalNode(topology, ports[1], 'SIGKILL');
      const count = await total(procs);
      const after = Number(await counterClient.redis.get(counterKey));
      expect(after).toBe(count); // no double grant while two masters were gone
      expect(after).toBeGreaterThan(before); // and acquisitions went on

      await signalNode(topology, ports[2], 'SIGKILL');
      const clients = clientsFor(ports, 300);
      try {
        const started = Date.now();
        const error = await new RedLock(clients, 'kill')
          .lock({ waitTime: 2_000, leaseTime: 5_000 })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockQuorumError);
        expect((error as LockQuorumError).name).toBe('LockQuorumError');
        expect((error as LockQuorumError).reachable).toBe(2);
        expect(Date.now() - started).toBeLessThan(2_000 + 2_000);
        const survivors = clients.slice(3);
        const key = survivors[0].getLock('kill').keys.lock;
        expect(await Promise.all(survivors.map((c) => c.redis.exists(key)))).toEqual([0, 0]);
      } finally {
        await closeAll(clients);
      }
    }, 90_000);
  });
});
