import { randomUUID } from 'node:crypto';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { killAll, type Worker } from '../support/workers';
import {
  counterServer,
  epochNow,
  firstSectionAfter,
  printReport,
  Race,
  RACERS,
  sectionsOf,
  sleep,
  analyse,
  type FaultRacerResult,
} from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, a paused holder: 7 processes race on one key with an explicit 2 s lease, writing each
 * critical section's fencing token to a resource that rejects tokens older than the highest it has
 * seen. An 8th process takes the lock and is SIGSTOPped for 4 s, past its lease. Another process gets
 * the lock once the lease ran out (not before); when the paused one resumes, its signal has aborted
 * (lease-expired) and its write, carrying the older token, is rejected. Private server on port 7330.
 */
const BASE_PORT = PRIVATE_PORTS.faultPausedHolder.base;
const LEASE_MS = 2_000;
const PAUSE_MS = 4_000;

describe('fault: a paused holder', () => {
  let topology: RunningTopology;
  const workers: Worker[] = [];

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: BASE_PORT });
  }, 60_000);
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  });

  it('another process gets the lock after the lease; the resumed holder is told, and its stale fenced write is rejected', async () => {
    const counter = counterServer();
    const prefix = `fault-${randomUUID().slice(0, 8)}`;
    const counterKey = `${prefix}:counter`;
    const env = {
      CONNECTION: JSON.stringify({ type: 'single', ...topology.masters[0] }),
      KEY_PREFIX: prefix,
      LOCK_NAME: 'hot',
      COUNTER_PORT: counter.port,
      COUNTER_KEY: counterKey,
      FENCE_KEY: `${prefix}:resource`,
      LEASE_MS,
    };
    try {
      const race = await Race.start(RACERS - 1, env, workers);
      const [paused] = (await Race.start(1, { ...env, PAUSED_HOLDER: 1, HOLD_MS: 1_000, WAIT_MS: 60_000 }, workers))
        .workers;
      await paused.waitFor('holding');
      process.kill(paused.child.pid!, 'SIGSTOP');
      const stoppedAt = epochNow();
      try {
        await sleep(PAUSE_MS);
      } finally {
        process.kill(paused.child.pid!, 'SIGCONT');
      }
      const holder = ((await paused.result) as FaultRacerResult).paused!;
      await sleep(500);
      const results = await race.stop();
      const sections = sectionsOf(results);
      const leaseEnd = holder.acquiredAt + LEASE_MS;
      const next = firstSectionAfter(sections, holder.acquiredAt, true);
      const report = analyse(results, Number(await counter.redis.get(counterKey)), leaseEnd);
      printReport('a holder SIGSTOPped past its 2 s lease (explicit leaseTime)', report, {
        'paused for': `${Math.round(holder.resumedAt - stoppedAt)} ms`,
        'resumed holder': `token ${holder.token}, signal aborted ${holder.abortedBeforeWrite ? 'before' : holder.abortedAfterWrite ? 'right after' : 'never'} its write (${holder.reason}), write ${holder.write}, release ${holder.release}`,
        'highest token seen by the resource': String(Math.max(...sections.map((s) => s.token))),
      });
      // Nobody else held it during the paused holder's lease, and somebody did right after.
      expect(next).toBeDefined();
      expect(next!.start).toBeGreaterThanOrEqual(leaseEnd - 50); // 50 ms: the two processes' clocks
      expect(report.outageMs).toBeLessThan(2_000);
      expect(next!.token).toBeGreaterThan(holder.token);
      // The resumed holder: told it lost the lock, its stale write refused.
      expect(holder.abortedAfterWrite).toBe(true);
      expect(holder.reason).toBe('lease-expired');
      expect(holder.write).toBe('rejected');
      // The racers themselves: safe, and every fenced write of theirs accepted.
      expect(report.doubleGrants).toBe(0);
      expect(report.lostUpdates).toBe(0);
      expect(results.reduce((n, r) => n + r.fenced.rejected, 0)).toBe(0);
    } finally {
      counter.redis.disconnect();
    }
  }, 90_000);
});
