import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { killAll, type Worker } from '../support/workers';
import { PAUSE_MS, printReport, sentinelFaultCase, type SentinelCase } from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, sentinel master paused: 8 processes race on one key (racy counter on another server),
 * the master is SIGSTOPped for 4 s, then SIGCONTed (sentinel promotes a replica meanwhile and demotes
 * the old master when it thaws). No double grant, no lost update, and the key is acquired again
 * within the failover time + 1 s. Private sentinel topology on port 7280 (7280-7288).
 */
const BASE_PORT = PRIVATE_PORTS.faultSentinelPause.base;

describe('fault: sentinel master paused (SIGSTOP 4 s)', () => {
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
    { kind: 'fair', lease: 'watchdog' },
  ];

  it.each(cases)(
    '$kind lock, $lease lease: the key is acquired again within the failover time + 1 s, no double grant, no lost update',
    async (c) => {
      const { report, failoverMs, phases } = await sentinelFaultCase(topology, 'pause', c, workers);
      printReport(`sentinel master SIGSTOP ${PAUSE_MS / 1000} s, ${c.kind} lock, ${c.lease} lease`, report, {
        failover: `${Math.round(failoverMs)} ms`,
        phases,
      });
      expect(report.doubleGrants).toBe(0);
      expect(report.lostUpdates).toBe(0);
      expect(report.after).toBeGreaterThan(0);
      expect(report.outageMs).toBeLessThanOrEqual(failoverMs + 1_000);
    },
    120_000,
  );
});
