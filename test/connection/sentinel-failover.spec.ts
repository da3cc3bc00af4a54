import { randomUUID } from 'node:crypto';
import { createLockClient, type ConnectionOptions, type SentinelConnectionOptions } from '../../lib';
import { signalNode, startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import Redis from 'ioredis';
import { eventually, quietLogger, sleep } from '../support/engine';
import { killAll, startWorker, type Worker } from '../support/workers';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Failovers under load, each on a private sentinel topology (ports 7240, 7250, 7260): the master is
 * stopped or frozen while clients contend, and they must carry on with the promoted replica; or it
 * is stopped just before a client connects, which must then connect to the promoted one; or it dies
 * between a grant and its replica sync (and a master-slave topology on 7250 where only the
 * connection drops there).
 */
describe('sentinel failover', () => {
  const workers: Worker[] = [];
  const topologies: RunningTopology[] = [];
  afterEach(async () => {
    await killAll(workers.splice(0));
    for (const t of topologies.splice(0)) await stopTopology(t).catch(() => undefined);
  });

  const sentinelConnection = (t: RunningTopology): SentinelConnectionOptions => ({
    type: 'sentinel',
    sentinels: t.sentinels,
    masterName: t.sentinelMasterName!,
  });

  /** Runs 4 racing processes for 12 s and stops the master once they have raced a while. */
  async function contendThroughFailover(basePort: number, replicaSync: 'off' | 'auto') {
    const topology = await startTopology('sentinel', { basePort });
    topologies.push(topology);
    const prefix = `fo-${randomUUID().slice(0, 8)}`;
    const env = {
      CONNECTION: JSON.stringify(sentinelConnection(topology) as ConnectionOptions),
      KEY_PREFIX: prefix,
      LOCK_NAME: 'contended',
      COUNTER_KEY: `${prefix}:counter`,
      DURATION_MS: 12_000,
      WATCHDOG_MS: 3_000,
      ...(replicaSync === 'off' ? { REPLICA_SYNC: 'off' } : {}), // else the default, 'auto'
    };
    const procs = Array.from({ length: 4 }, () => startWorker('failover-racer.ts', env));
    workers.push(...procs);
    // Let the workers start and race for a while before the master goes.
    const master = new Redis({ ...topology.masters[0], maxRetriesPerRequest: 1 });
    try {
      await eventually(async () => Number(await master.get(env.COUNTER_KEY)) >= 200, 30_000, 100);
    } finally {
      master.disconnect();
    }
    const stoppedAt = Date.now();
    await stopNode(topology, topology.masters[0].port);
    const results = (await Promise.all(procs.map((w) => w.result))) as {
      intervals: [number, number][];
      errors: string[];
    }[];
    const all = results.flatMap((r, proc) => r.intervals.map(([start, end]) => ({ proc, start, end })));
    all.sort((a, b) => a.start - b.start);
    let doubleGrants = 0;
    for (let i = 1; i < all.length; i++)
      if (all[i].start < all[i - 1].end && all[i].proc !== all[i - 1].proc) doubleGrants++;
    const beforeFailover = all.filter((x) => x.end < stoppedAt).length;
    const afterFailover = all.filter((x) => x.start > stoppedAt + 1_000).length;
    const errors = results.flatMap((r) => r.errors);
    return { total: all.length, doubleGrants, beforeFailover, afterFailover, errors };
  }

  it('clients keep acquiring and releasing after the master is stopped mid-run (double grants measured)', async () => {
    const plain = await contendThroughFailover(7240, 'off');
    const synced = await contendThroughFailover(7250, 'auto');
    process.stdout.write(
      `\nsentinel failover under contention (4 processes for 12 s, the master stopped midway):\n` +
        `  replicaSync false:  ${plain.total} critical sections, ${plain.doubleGrants} double grants, ` +
        `${plain.beforeFailover} before / ${plain.afterFailover} after the failover, errors: ${summarize(plain.errors)}\n` +
        `  replicaSync 'auto': ${synced.total} critical sections, ${synced.doubleGrants} double grants, ` +
        `${synced.beforeFailover} before / ${synced.afterFailover} after the failover, errors: ${summarize(synced.errors)}\n`,
    );
    // No deadlock, nobody stuck: every worker finished (its waits are bounded by waitTime) and the
    // lock kept being granted on the promoted master.
    expect(plain.afterFailover).toBeGreaterThan(0);
    expect(synced.afterFailover).toBeGreaterThan(0);
  }, 120_000);

  it('a client created while the master is down (sentinels not failed over yet) connects to the promoted replica', async () => {
    const topology = await startTopology('sentinel', { basePort: PRIVATE_PORTS.sentinelFailover.base });
    topologies.push(topology);
    const oldMaster = topology.masters[0].port;
    await stopNode(topology, oldMaster);
    const stoppedAt = Date.now();
    // The sentinels name the dead master for about a second (down-after) and the election: every
    // attempt meanwhile is refused, and must be tried again rather than fail start-up.
    const locks = await createLockClient({
      connection: sentinelConnection(topology),
      keyPrefix: `late-${randomUUID().slice(0, 8)}`,
      // A budget of 15 s: room for a sentinel election that splits and is held again (failover-timeout 3 s).
      operationTimeout: 5_000,
      logger: quietLogger,
    });
    try {
      const connectedAfter = Date.now() - stoppedAt;
      process.stdout.write(`\nsentinel, client created with the master down: connected after ${connectedAfter} ms\n`);
      const handle = await locks.getLock('after-promotion').lock({ leaseTime: 5_000 });
      expect(await handle.release()).toBe('released');
      const info = (await (locks.redis as Redis).info('server')) as string;
      expect(info).not.toContain(`tcp_port:${oldMaster}\r`);
    } finally {
      await locks.close();
    }
  }, 60_000);

  it('a frozen master (SIGSTOP past the failover) does not stall clients until it thaws', async () => {
    const topology = await startTopology('sentinel', { basePort: PRIVATE_PORTS.sentinelFailoverSecond.base });
    topologies.push(topology);
    const locks = await createLockClient({
      connection: { ...sentinelConnection(topology), commandTimeout: 1_000 },
      keyPrefix: `stop-${randomUUID().slice(0, 8)}`,
      operationTimeout: 1_500,
      logger: quietLogger,
    });
    const masterPort = topology.masters[0].port;
    try {
      await locks.getLock('frozen').withLock(() => undefined);
      const pause = 20_000;
      await signalNode(topology, masterPort, 'SIGSTOP');
      const frozenAt = Date.now();
      let resumedAt = 0;
      while (Date.now() - frozenAt < pause - 2_000) {
        const ok = await locks
          .getLock('frozen')
          .withLock(() => true, { waitTime: 1_000 })
          .catch(() => false);
        if (ok) {
          resumedAt = Date.now();
          break;
        }
        await sleep(100);
      }
      const resumeMs = resumedAt ? resumedAt - frozenAt : Infinity;
      process.stdout.write(
        `\nsentinel, master frozen with SIGSTOP for ${pause / 1000} s: clients resumed after ${resumeMs} ms\n`,
      );
      expect(resumedAt).toBeGreaterThan(0); // resumed while the old master was still frozen
      expect(resumeMs).toBeLessThan(12_000); // about the failover time (down-after 1 s + election), not the pause
    } finally {
      await signalNode(topology, masterPort, 'SIGCONT').catch(() => undefined);
      await locks.close();
    }
  }, 90_000);

  /**
   * Cuts the master's replicas off before a grant (frozen, their links closed by the master), so that
   * no replica can have it: the grant's replica sync (the default 'auto') then waits in vain.
   */
  async function cutOffReplicas(topology: RunningTopology): Promise<() => Promise<void>> {
    const replicas = topology.replicas.map((r) => r.port);
    for (const port of replicas) await signalNode(topology, port, 'SIGSTOP');
    const master = new Redis({ port: topology.masters[0].port, maxRetriesPerRequest: 1 });
    try {
      await master.call('CLIENT', 'KILL', 'TYPE', 'replica');
    } finally {
      master.disconnect();
    }
    let resumed = false;
    return async () => {
      if (resumed) return;
      resumed = true;
      for (const port of replicas) await signalNode(topology, port, 'SIGCONT').catch(() => undefined);
    };
  }

  /** Resolves once the master at `port` has the lock `name` under `prefix`. */
  async function grantedOn(port: number, prefix: string, name: string): Promise<void> {
    const master = new Redis({ port, maxRetriesPerRequest: 1 });
    try {
      await eventually(async () => (await master.exists(`${prefix}:{${name}}`)) === 1, 5_000, 5);
    } finally {
      master.disconnect();
    }
  }

  /**
   * Kills the master while a grant's replica sync waits (no replica can have it), and checks that
   * `lock()` returns only once it holds the lock on the promoted replica. `own`: the lock client runs
   * on the application's own ioredis client with ioredis's defaults, which sends a pending WAIT again
   * after reconnecting, to the new master.
   */
  async function grantLostWithItsMaster(own: boolean): Promise<void> {
    const topology = await startTopology('sentinel', { basePort: PRIVATE_PORTS.sentinelFailover.base });
    topologies.push(topology);
    const prefix = `lost-${randomUUID().slice(0, 8)}`;
    const ownClients: Redis[] = [];
    const connect = (connection: ConnectionOptions) =>
      createLockClient({
        connection,
        keyPrefix: prefix,
        operationTimeout: 5_000, // a budget of 15 s to find the promoted master
        logger: quietLogger,
      });
    const ownClient = async () => {
      const client = new Redis({ sentinels: topology.sentinels, name: topology.sentinelMasterName! });
      client.on('error', () => undefined); // an application listens; the failover's errors are expected here
      ownClients.push(client);
      await client.ping(); // connected before the lock client reads its master's replicas
      return client;
    };
    const a = await connect(own ? { type: 'client', client: await ownClient() } : sentinelConnection(topology));
    const masterPort = topology.masters[0].port;
    try {
      await a.getLock('warm-up').withLock(() => undefined); // the master's replicas are known from here on
      const resume = await cutOffReplicas(topology);
      try {
        const acquiring = a.getLock('contested').lock({ leaseTime: 30_000 });
        await grantedOn(masterPort, prefix, 'contested'); // granted; its replica sync waits
        await signalNode(topology, masterPort, 'SIGKILL');
        const killedAt = Date.now();
        await resume(); // now the sentinels can promote one of them, which never had the grant
        const handle = await acquiring;
        const after = Date.now() - killedAt;
        process.stdout.write(
          `\nsentinel, master killed before its replicas had a grant${own ? ' (own ioredis client)' : ''}: ` +
            `lock() returned after ${after} ms\n`,
        );
        // The lock is held on the promoted master, by that handle: nobody else can take it.
        const b = await connect(sentinelConnection(topology));
        try {
          const info = (await (b.redis as Redis).info('server')) as string;
          expect(info).not.toContain(`tcp_port:${masterPort}\r`);
          expect(await b.getLock('contested').tryLock({ waitTime: 0 })).toBeNull();
          expect(await (b.redis as Redis).hget(`${prefix}:{contested}`, handle.owner)).toBe('1');
        } finally {
          await b.close();
        }
        expect(await handle.release()).toBe('released');
      } finally {
        await resume();
      }
    } finally {
      await a.close();
      for (const client of ownClients) client.disconnect();
    }
  }

  it('a grant that dies with its master before any replica has it is not handed out: lock() takes the lock again from the promoted replica', async () => {
    await grantLostWithItsMaster(false);
  }, 60_000);

  it("the same on the application's own ioredis client, whose pending WAIT is sent again to the new master", async () => {
    await grantLostWithItsMaster(true);
  }, 60_000);

  it('a grant whose connection dropped before a replica had it, on a master that lives on, is kept: checked, not taken twice', async () => {
    const topology = await startTopology('replica', { basePort: PRIVATE_PORTS.replicaFailover.base });
    topologies.push(topology);
    const prefix = `kept-${randomUUID().slice(0, 8)}`;
    const masterPort = topology.masters[0].port;
    const connectionName = `kept-${prefix.slice(-6)}`;
    const a = await createLockClient({
      connection: {
        type: 'master-slave',
        master: { host: '127.0.0.1', port: masterPort },
        replicas: topology.replicas,
        redisOptions: { connectionName },
      },
      keyPrefix: prefix,
      logger: quietLogger,
    });
    const admin = new Redis({ port: masterPort, maxRetriesPerRequest: 1 });
    try {
      await a.getLock('warm-up').withLock(() => undefined);
      const resume = await cutOffReplicas(topology);
      try {
        const acquiring = a.getLock('contested').lock({ leaseTime: 30_000 });
        await grantedOn(masterPort, prefix, 'contested');
        const tokenBefore = await admin.get(`${prefix}:{contested}:fence`);
        await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'); // the lock connection, mid-WAIT
        const handle = await acquiring;
        expect(await admin.hget(`${prefix}:{contested}`, handle.owner)).toBe('1');
        // The same grant: no second acquisition was made.
        expect(await admin.get(`${prefix}:{contested}:fence`)).toBe(tokenBefore);
        expect(handle.fencingToken).toBe(Number(tokenBefore));
        expect(await handle.release()).toBe('released');
      } finally {
        await resume();
      }
    } finally {
      admin.disconnect();
      await a.close();
    }
  }, 60_000);
});

function summarize(errors: string[]): string {
  const counts = new Map<string, number>();
  for (const e of errors) counts.set(e, (counts.get(e) ?? 0) + 1);
  return counts.size === 0 ? 'none' : [...counts].map(([name, n]) => `${name} x${n}`).join(', ');
}
