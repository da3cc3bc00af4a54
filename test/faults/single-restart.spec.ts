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
 *
 * An empty restart forgets the lock, so a holder granted just before it that is still in its section (a
 * stalled process) overlaps the first holders after it: no library can prevent that without persistence.
 * What it promises is the fencing token: the counter here is a fenced resource (it refuses a token below
 * the highest that touched it), every overlap involves a grant of the old server, the new server's grants
 * never overlap each other, and no accepted write is lost.
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
    '%s lock: waiters acquire within 1 s of the restart, holders are told the lock is gone, a holder stalled across it is fenced out, no lost update',
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
            FENCED_COUNTER: 1,
          },
          workers,
        );
        expect(await counterReaches(counter.redis, counterKey, 100, 30_000)).toBe(true);
        // One holder stays inside its section across the restart (a stalled process).
        const [stalled] = race.workers;
        stalled.send('hold');
        await stalled.waitFor('holding 1');
        const faultAt = epochNow();
        await stopNode(topology, port); // SIGTERM: no persistence, nothing saved
        const downAt = epochNow();
        await restartNode(topology, port);
        const upAt = epochNow();
        const atRestart = Number(await counter.redis.get(counterKey));
        await counterReaches(counter.redis, counterKey, atRestart + 50, 15_000);
        stalled.send('release'); // its write comes after the new holders' and must be refused
        await sleep(WATCHDOG_MS); // every side lock has been renewed (or found gone) at least once since
        const results = await race.stop();
        const report = analyse(results, Number(await counter.redis.get(counterKey)), downAt);
        const firstAfterRestart = report.outageMs - (upAt - downAt);
        const sides = results.map((r) => r.side!);
        const toldAfter = sides.map((s) => (s.lostAt === undefined ? Infinity : s.lostAt - upAt));
        const fencedOut = results.flatMap((r) => r.fencedOut);
        printReport(`single Redis restarted empty, ${kind} lock, watchdog lease`, report, {
          'server down': `${Math.round(downAt - faultAt)} ms`,
          'restart took': `${Math.round(upAt - downAt)} ms`,
          'first acquisition after the restart': `${Math.round(firstAfterRestart)} ms`,
          'sections the fenced counter refused': `${fencedOut.length}`,
          'long-held locks lost': `${sides.filter((s) => s.lostAt !== undefined).length}/${sides.length} (${[
            ...new Set(sides.map((s) => s.reason)),
          ].join(
            ', ',
          )}), told ${Math.round(Math.min(...toldAfter))}-${Math.round(Math.max(...toldAfter))} ms after the restart`,
        });
        // Tokens are at least Redis's clock in µs, so the new server's are above the moment it stopped.
        const oldServer = (token: number): boolean => token < downAt * 1_000;
        const crowdedPairs = results.flatMap((r) =>
          r.crowdedWith.flatMap(([token, others]) => others.map((other) => [token, other])),
        );
        expect(crowdedPairs.filter((pair) => !pair.some(oldServer))).toEqual([]);
        expect(fencedOut.filter((token) => !oldServer(token))).toEqual([]);
        // The stalled holder's section overlapped the new server's first holders, and its write was refused.
        expect(results[0].fencedOut).toHaveLength(1);
        expect(crowdedPairs.length).toBeGreaterThan(0);
        expect(report.lostUpdates).toBe(fencedOut.length); // each accepted section added exactly one
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
