import { randomUUID } from 'node:crypto';
import { restartNode, startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { killAll, type Worker } from '../support/workers';
import { analyse, counterReaches, counterServer, epochNow, printReport, Race, RACERS, sleep } from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, a single Redis restarted EMPTY (no persistence) under load: 8 processes race on one key
 * with watchdog leases (watchdogTimeout 3 s, renewed every second), and each also holds a second lock
 * of its own for the whole run. After the restart the waiters acquire within 1 s, and every process
 * learns at its next renewal that its long-held lock is gone (its signal aborts with LockLostError).
 * Private server on port 7310.
 */
const BASE_PORT = PRIVATE_PORTS.faultSingleRestart.base;
const WATCHDOG_MS = 3_000;

describe('fault: single Redis restarted empty', () => {
  let topology: RunningTopology;
  const workers: Worker[] = [];

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: BASE_PORT });
  }, 60_000);
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  });

  it.each(['reentrant', 'fair'])(
    '%s lock: waiters acquire within 1 s of the restart, holders are told the lock is gone, no double grant, no lost update',
    async (kind) => {
      const port = topology.masters[0].port;
      const counter = counterServer();
      const prefix = `fault-${randomUUID().slice(0, 8)}`;
      const counterKey = `${prefix}:counter`;
      try {
        const race = await Race.start(
          RACERS,
          {
            CONNECTION: JSON.stringify({ type: 'single', host: '127.0.0.1', port }),
            KEY_PREFIX: prefix,
            LOCK_NAME: 'hot',
            LOCK_KIND: kind,
            COUNTER_PORT: counter.port,
            COUNTER_KEY: counterKey,
            WATCHDOG_MS,
            SIDE_LOCK: 1,
          },
          workers,
        );
        expect(await counterReaches(counter.redis, counterKey, 100, 30_000)).toBe(true);
        const faultAt = epochNow();
        await stopNode(topology, port); // SIGTERM: no persistence, nothing saved
        const downAt = epochNow();
        await restartNode(topology, port);
        const upAt = epochNow();
        const atRestart = Number(await counter.redis.get(counterKey));
        await counterReaches(counter.redis, counterKey, atRestart + 50, 15_000);
        await sleep(WATCHDOG_MS); // every side lock has been renewed (or found gone) at least once since
        const results = await race.stop();
        const report = analyse(results, Number(await counter.redis.get(counterKey)), downAt);
        const firstAfterRestart = report.outageMs - (upAt - downAt);
        const sides = results.map((r) => r.side!);
        const toldAfter = sides.map((s) => (s.lostAt === undefined ? Infinity : s.lostAt - upAt));
        printReport(`single Redis restarted empty, ${kind} lock, watchdog lease`, report, {
          'server down': `${Math.round(downAt - faultAt)} ms`,
          'restart took': `${Math.round(upAt - downAt)} ms`,
          'first acquisition after the restart': `${Math.round(firstAfterRestart)} ms`,
          'long-held locks lost': `${sides.filter((s) => s.lostAt !== undefined).length}/${sides.length} (${[
            ...new Set(sides.map((s) => s.reason)),
          ].join(
            ', ',
          )}), told ${Math.round(Math.min(...toldAfter))}-${Math.round(Math.max(...toldAfter))} ms after the restart`,
        });
        expect(report.doubleGrants).toBe(0);
        expect(report.lostUpdates).toBe(0);
        // The restart lost every counter: tokens still only grow (they never fall below Redis's clock), so a
        // resource that stored a token before the fault accepts the holders after it.
        const sections = results.flatMap((r) => r.sections);
        const before = sections.filter(([, , end]) => end < downAt).map(([, , , token]) => token);
        const after = sections.filter(([, start]) => start > upAt).map(([, , , token]) => token);
        expect(before.length).toBeGreaterThan(0);
        expect(after.length).toBeGreaterThan(0);
        expect(Math.min(...after)).toBeGreaterThan(Math.max(...before));
        expect(firstAfterRestart).toBeLessThanOrEqual(1_000);
        for (const side of sides) {
          expect(side.reason).toBe('not-owner'); // a renewal found the lock gone
          expect(side.lostAt! - upAt).toBeLessThan(WATCHDOG_MS); // at the next renewal (every second), generous
        }
      } finally {
        counter.redis.disconnect();
      }
    },
    90_000,
  );
});
