import { randomUUID } from 'node:crypto';
import { lockKeys } from '../../lib/internal';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { killAll, type Worker } from '../support/workers';
import {
  analyse,
  clusterPromoted,
  clusterShard,
  counterReaches,
  counterServer,
  epochNow,
  longestGap,
  printReport,
  Race,
  RACERS,
  sectionsOf,
  sleep,
} from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, cluster: 8 processes race on one key while a 9th locks a key on another shard; the hot
 * key's master is SIGKILLed and its replica promoted (cluster-node-timeout 2 s). The other shard's
 * lock keeps being granted during the failover; the hot key is acquired again within the failover
 * time (kill -> a survivor sees the replica as a master owning slots) + 1 s; no double grant,
 * no lost update. With an explicit lease, then a watchdog lease on another shard (the first case's
 * shard has no replica left). Private cluster on ports 7290-7295 (bus 17290-17295).
 */
const BASE_PORT = PRIVATE_PORTS.faultClusterKill.base;

/**
 * What #13 asks. Measured 0.3-0.7 s past the failover over 9 runs, since ioredis no longer re-sends
 * commands behind the engine's back (a lock attempt that ran twice held the key for its lease) and
 * the harness no longer stops every shard while one fails over; 0.5-1.3 s before.
 */
const RECOVERY_MS = 1_000;

describe('fault: cluster master SIGKILL', () => {
  let topology: RunningTopology;
  const workers: Worker[] = [];

  beforeAll(async () => {
    topology = await startTopology('cluster', { basePort: BASE_PORT });
  }, 90_000);
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  });

  /** Masters killed by earlier cases: each case fails over a shard that still has its replica. */
  const killed = new Set<number>();
  /** A key named `base-<n>` whose shard's master is alive and not in `avoid`, and that shard. */
  const keyOnShard = async (prefix: string, base: string, avoid: Set<number>) => {
    const via = topology.masters.find((m) => !killed.has(m.port))!;
    for (let i = 0; ; i++) {
      // A slot of a shard failed over earlier has no replica left: clusterShard refuses it.
      const shard = await clusterShard(topology, lockKeys(prefix, `${base}-${i}`).lock, via).catch(() => undefined);
      if (shard && !avoid.has(shard.master.port) && !killed.has(shard.replica.port))
        return { name: `${base}-${i}`, shard };
    }
  };

  it.each(['explicit', 'watchdog'] as const)(
    'reentrant lock, %s lease: the failed shard is usable again within the failover time + 1 s, other shards unaffected',
    async (lease) => {
      const prefix = `fault-${randomUUID().slice(0, 8)}`;
      const { name: hot, shard } = await keyOnShard(prefix, 'hot', killed);
      const { name: other } = await keyOnShard(prefix, 'other', new Set([...killed, shard.master.port]));
      const counter = counterServer(); // after the lookups: only the try below disconnects it
      const env = {
        CONNECTION: JSON.stringify({ type: 'cluster', nodes: topology.masters.filter((m) => !killed.has(m.port)) }),
        KEY_PREFIX: prefix,
        LOCK_NAME: hot,
        COUNTER_PORT: counter.port,
        COUNTER_KEY: `${prefix}:counter`,
        ...(lease === 'explicit' ? { LEASE_MS: 10_000 } : {}),
        WAIT_MS: 10_000,
      };
      try {
        const race = await Race.start(RACERS, env, workers);
        const bystander = await Race.start(
          1,
          { ...env, LOCK_NAME: other, COUNTER_KEY: `${prefix}:other-counter`, WORK_MS: 5 },
          workers,
        );
        expect(await counterReaches(counter.redis, env.COUNTER_KEY, 100, 30_000)).toBe(true);
        const survivor = topology.masters.find((m) => m.port !== shard.master.port && !killed.has(m.port))!;
        await signalNode(topology, shard.master.port, 'SIGKILL');
        killed.add(shard.master.port);
        const faultAt = epochNow(); // once delivered: a lock() called before could still be granted
        const promotedAt = await clusterPromoted(topology, survivor, shard.replica.id);
        const atFault = Number(await counter.redis.get(env.COUNTER_KEY));
        await counterReaches(counter.redis, env.COUNTER_KEY, atFault + 50, 25_000);
        await sleep(1_000);
        const [results, otherResults] = await Promise.all([race.stop(), bystander.stop()]);
        const report = analyse(results, Number(await counter.redis.get(env.COUNTER_KEY)), faultAt);
        const otherSections = sectionsOf(otherResults).filter((s) => s.start >= faultAt && s.start <= promotedAt);
        const otherGap = longestGap(sectionsOf(otherResults), faultAt, promotedAt);
        const failoverMs = promotedAt - faultAt;
        printReport(`cluster master SIGKILL, reentrant lock, ${lease} lease`, report, {
          failover: `${Math.round(failoverMs)} ms`,
          'other shard during the failover': `${otherSections.length} acquisitions, longest gap ${Math.round(otherGap)} ms`,
        });
        expect(report.doubleGrants).toBe(0);
        expect(report.lostUpdates).toBe(0);
        // The racers never re-enter: a release that only decremented found an attempt that ran twice.
        expect(report.releases.decremented ?? 0).toBe(0);
        expect(report.outageMs).toBeLessThanOrEqual(failoverMs + RECOVERY_MS);
        expect(otherSections.length).toBeGreaterThan(0);
        // Unaffected: measured 0.2-0.4 s at most between two of its grants (each takes 5 ms of work).
        expect(otherGap).toBeLessThan(1_000);
      } finally {
        counter.redis.disconnect();
      }
    },
    120_000,
  );
});
