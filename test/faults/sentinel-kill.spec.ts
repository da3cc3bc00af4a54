import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { killAll, type Worker } from '../support/workers';
import { printReport, sentinelFaultCase, type SentinelCase } from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, sentinel master SIGKILL: 8 processes race on one key (racy counter on another server),
 * the master is killed mid-run, sentinel promotes a replica. For the reentrant and the fair lock,
 * with an explicit 10 s lease and with a watchdog lease: no double grant, no lost update, no grant
 * while there is no master (the reentrant lock's lent holds included, see NO_MASTER_GRACE_MS), and the
 * key is acquired again within the failover time + 1 s. Private sentinel topology on port 7270 (7270-7278),
 * healed between cases (the killed node is restarted and rejoins as a replica).
 */
const BASE_PORT = PRIVATE_PORTS.faultSentinelKill.base;

describe('fault: sentinel master SIGKILL', () => {
  let topology: RunningTopology;
  const workers: Worker[] = [];

  beforeAll(async () => {
    topology = await startTopology('sentinel', { basePort: BASE_PORT });
  }, 60_000);
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  });

  const cases: SentinelCase[] = [
    { kind: 'reentrant', lease: 'explicit' },
    { kind: 'reentrant', lease: 'watchdog' },
    { kind: 'fair', lease: 'explicit' },
    { kind: 'fair', lease: 'watchdog' },
  ];

  it.each(cases)(
    '$kind lock, $lease lease: the key is acquired again within the failover time + 1 s, no double grant, no lost update',
    async (c) => {
      const { report, failoverMs, phases, withoutMaster } = await sentinelFaultCase(topology, 'kill', c, workers);
      printReport(`sentinel master SIGKILL, ${c.kind} lock, ${c.lease} lease`, report, {
        failover: `${Math.round(failoverMs)} ms`,
        phases,
      });
      // Every grant comes from Redis: none while there is no master.
      expect(withoutMaster).toEqual([]);
      expect(report.doubleGrants).toBe(0);
      expect(report.lostUpdates).toBe(0);
      expect(report.after).toBeGreaterThan(0);
      expect(report.outageMs).toBeLessThanOrEqual(failoverMs + 1_000);
    },
    120_000,
  );
});
