import Redis from 'ioredis';
import { LockClient, LockQuorumError, RedLock } from '../../lib';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { eventually, lockClient, quietLogger, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { killAll, startTogether, startWorker, type Worker } from '../support/workers';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { engineOf } from '../../lib/internal';

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

  it('a RedLock taken inside a holder of a lock A is nested in its section: A asked for again inside it re-enters', async () => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const clients = clientsFor(ports);
    try {
      const outer = counterClient.locks.getLock('nested-in-redlock');
      const redLock = new RedLock(clients, 'nested');
      const result = await outer.withLock(() =>
        redLock.withLock(() => outer.withLock(() => 'inner A re-entered', { waitTime: 0 }), { waitTime: 2_000 }),
      );
      expect(result).toBe('inner A re-entered');
      expect(await outer.isLocked()).toBe(false);
    } finally {
      await closeAll(clients);
    }
  });

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

  it('a release wakes the process that waited longest, not every waiting process: one gate vote per hand-off', async () => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    // Each set of clients stands for a process (its own client ids and connections).
    const processes = Array.from({ length: 5 }, () => clientsFor(ports));
    const name = 'wake-one';
    try {
      await Promise.all(processes.flat().map((c) => c.redis.ping()));
      const gateKey = processes[0][0].getLock(name).keys.lock;
      // Votes each process asks of the gate (the first master) for this name, and those answered.
      const gateVotes = processes.map(() => 0);
      const gateAnswers = processes.map(() => 0);
      processes.forEach((clients, p) => {
        const send = clients[0].redis.sendCommand.bind(clients[0].redis);
        jest.spyOn(clients[0].redis, 'sendCommand').mockImplementation((command, ...rest) => {
          const c = command as unknown as { name: string; args: unknown[] };
          const vote = String(c.args[3]).endsWith(':fence'); // a vote's second key; a release's is the channel
          const gateVote = (c.name === 'evalsha' || c.name === 'eval') && c.args[2] === gateKey && vote;
          if (gateVote) gateVotes[p]++;
          const reply = send(command, ...rest) as Promise<unknown>;
          // An EVALSHA refused NOSCRIPT is sent again as EVAL: that one's answer counts.
          if (gateVote)
            void reply.then(
              () => gateAnswers[p]++,
              (error: Error) => !/^NOSCRIPT/.test(error.message) && gateAnswers[p]++,
            );
          return reply;
        });
      });
      const waitingKey = processes[0][0].getLock(name).keys.waiting;
      const waitingOnEachMaster = () => Promise.all(processes[0].map((c) => c.redis.zcard(waitingKey)));
      const holder = await new RedLock(processes[0], name).lock({ leaseTime: 30_000 });
      const order: number[] = [];
      const waits: Promise<void>[] = [];
      for (const [i, clients] of processes.slice(1).entries()) {
        // A long instance timeout and quiet re-check: no waiter re-checks the gate on its own (see the
        // stale-gate case, and RedLock.watchReleases) meanwhile.
        for (const client of clients) engineOf(client).quietRecheckMs = 60_000;
        const redLock = new RedLock(clients, name, { instanceTimeout: 5_000 });
        const wait = (async () => {
          const handle = await redLock.lock({ leaseTime: 30_000, waitTime: 20_000 });
          order.push(i + 1);
          await sleep(20);
          expect(await handle.release()).toBe('released');
        })();
        wait.catch(() => undefined); // awaited below (closeAll ends it if the wait for its turn fails first)
        waits.push(wait);
        // They queue in this order: the next starts once this one is registered on every master (its
        // first round refused), and its gate vote after subscribing was refused too (its second).
        await eventually(
          async () => (await waitingOnEachMaster()).every((n) => n === i + 1) && gateAnswers[i + 1] >= 2,
        );
      }
      const before = [...gateVotes];
      expect(await holder.release()).toBe('released');
      await Promise.all(waits);
      const after = gateVotes.map((v, p) => v - before[p]);
      expect(order).toEqual([1, 2, 3, 4]); // in the order they waited
      // Woken one at a time: each takes the gate at its first vote (4). With every waiter woken by every
      // release, those still waiting would each ask the gate again at each release (4 + 3 + 2 + 1).
      expect(after.slice(1).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(5);
    } finally {
      await closeAll(processes.flat());
    }
  }, 60_000);

  /**
   * Three processes on RedLock `name` over the multi topology's masters (a set of clients each): a holder
   * that holds it, one whose wait `gone` runs and ends without it (then `between` runs), and a waiter with
   * a 5 s instance timeout and a minute's quiet re-check (so no re-check of its own meanwhile). Resolves
   * with how long after the holder's release the waiter had the lock.
   */
  async function waiterAfterGoneWait(
    name: string,
    between: (c: { holderClients: LockClient[]; goneClients: LockClient[]; waiting: string }) => Promise<void>,
    waiterQueued: (waiterClients: LockClient[]) => Promise<unknown>,
  ): Promise<number> {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const [holderClients, goneClients, waiterClients] = [clientsFor(ports), clientsFor(ports), clientsFor(ports)];
    const all = [...holderClients, ...goneClients, ...waiterClients];
    try {
      await Promise.all(all.map((c) => c.redis.ping()));
      const { waiting } = holderClients[0].getLock(name).keys;
      const holder = await new RedLock(holderClients, name).lock({ leaseTime: 30_000 });
      expect(await new RedLock(goneClients, name).tryLock({ leaseTime: 30_000, waitTime: 300 })).toBeNull();
      await between({ holderClients, goneClients, waiting });
      for (const client of waiterClients) engineOf(client).quietRecheckMs = 60_000;
      const long = new RedLock(waiterClients, name, { instanceTimeout: 5_000 });
      const waitingLong = long.lock({ leaseTime: 30_000, waitTime: 20_000 });
      await waiterQueued(waiterClients);
      const releasedAt = Date.now();
      expect(await holder.release()).toBe('released');
      const handle = await waitingLong;
      const tookMs = Date.now() - releasedAt;
      expect(await handle.release()).toBe('released');
      return tookMs;
    } finally {
      await closeAll(all);
    }
  }

  /** Whether each master's registry of `waiting` holds (`wanted`) the client id `clients` have there. */
  const registeredEverywhere = async (masters: LockClient[], waiting: string, clients: LockClient[], wanted: boolean) =>
    (await Promise.all(masters.map((c) => c.redis.zrange(waiting, 0, -1)))).every(
      (registry, i) => registry.includes(clients[i].clientId) === wanted,
    );

  it('a process whose wait ended leaves the waiting registry: the next release wakes a process that waits', async () => {
    let masters: LockClient[] = [];
    let key = '';
    const tookMs = await waiterAfterGoneWait(
      'leave-registry',
      async ({ holderClients, goneClients, waiting }) => {
        [masters, key] = [holderClients, waiting];
        // Each master's client has a client id of its own: the id its process registers under there.
        await eventually(() => registeredEverywhere(holderClients, waiting, goneClients, false), 2_000);
      },
      (waiterClients) => eventually(() => registeredEverywhere(masters, key, waiterClients, true), 2_000),
    );
    expect(tookMs).toBeLessThan(2_000); // woken by the release, not by its own re-check (none for 5 s)
  }, 60_000);

  it('a wake-up that reaches a process with no waiter left is passed on to the next waiting process', async () => {
    const tookMs = await waiterAfterGoneWait(
      'pass-on',
      async ({ holderClients, goneClients, waiting }) => {
        await sleep(200); // its leaving the registries is done
        // Back first in line on every master (as if its leaving were lost), while its channels still linger.
        await Promise.all(holderClients.map((c, i) => c.redis.zadd(waiting, 0, goneClients[i].clientId)));
      },
      () => sleep(500), // refused, and registered behind the process that no longer waits
    );
    expect(tookMs).toBeLessThan(2_000); // the release woke the process that no longer waits: passed on at once
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
