import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { killAll, type Worker } from '../support/workers';
import {
  analyse,
  counterReaches,
  counterServer,
  epochNow,
  firstSectionAfter,
  printReport,
  Race,
  RACERS,
  sectionsOf,
  sleep,
} from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, the pub/sub connection killed alone: 8 processes race on one key; one of them keeps the
 * lock while the 7 others wait on their unlock channels, then every pub/sub connection on the server
 * is killed (`CLIENT KILL TYPE pubsub`) and the holder releases, once at once (the unlock message is
 * published while nobody is subscribed) and once 400 ms later (after the subscriptions came back).
 * The holder then stays away for 2 s, so only a waiter can take the lock: they must resume within
 * about a second, not at the lease's end. Private server on port 7320.
 */
const BASE_PORT = PRIVATE_PORTS.faultPubsubKill.base;
const RELEASE_DELAYS = [0, 400];

describe('fault: pub/sub connection killed alone', () => {
  let topology: RunningTopology;
  let admin: Redis;
  const workers: Worker[] = [];

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: BASE_PORT });
    admin = new Redis({ ...topology.masters[0], maxRetriesPerRequest: 1 });
  }, 60_000);
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    admin?.disconnect();
    if (topology) await stopTopology(topology);
  });

  it.each([
    ['reentrant', 'explicit'],
    ['fair', 'watchdog'],
  ])(
    '%s lock, %s lease: waiters resume within 1 s after the kill, no double grant, no lost update',
    async (kind, lease) => {
      const counter = counterServer();
      const prefix = `fault-${randomUUID().slice(0, 8)}`;
      const counterKey = `${prefix}:counter`;
      try {
        const race = await Race.start(
          RACERS,
          {
            CONNECTION: JSON.stringify({ type: 'single', ...topology.masters[0] }),
            KEY_PREFIX: prefix,
            LOCK_NAME: 'hot',
            LOCK_KIND: kind,
            COUNTER_PORT: counter.port,
            COUNTER_KEY: counterKey,
            ...(lease === 'explicit' ? { LEASE_MS: 10_000 } : { WATCHDOG_MS: 10_000 }),
          },
          workers,
          (i): Record<string, number> => (i === 0 ? { AFTER_HOLD_MS: 2_000 } : {}),
        );
        expect(await counterReaches(counter.redis, counterKey, 100, 30_000)).toBe(true);
        const holder = race.workers[0];
        const rounds: { killedAt: number; releasedAt: number }[] = [];
        for (const [i, delay] of RELEASE_DELAYS.entries()) {
          holder.send('hold');
          await holder.waitFor(`holding ${i + 1}`);
          await sleep(300); // the 7 others are parked on their channels
          const killedAt = epochNow();
          const killed = Number(await admin.client('KILL', 'TYPE', 'pubsub'));
          expect(killed).toBeGreaterThanOrEqual(RACERS - 1);
          if (delay > 0) await sleep(delay);
          holder.send('release');
          rounds.push({ killedAt, releasedAt: epochNow() });
          const at = Number(await counter.redis.get(counterKey));
          await counterReaches(counter.redis, counterKey, at + 30, 15_000);
        }
        const results = await race.stop();
        const report = analyse(results, Number(await counter.redis.get(counterKey)), rounds[0].killedAt);
        const sections = sectionsOf(results);
        const resumed = rounds.map(({ killedAt, releasedAt }) => {
          const first = firstSectionAfter(sections, releasedAt, true);
          return {
            fromKill: (first?.start ?? Infinity) - killedAt,
            fromRelease: (first?.start ?? Infinity) - releasedAt,
          };
        });
        printReport(`pub/sub connections killed, ${kind} lock, ${lease} lease`, report, {
          ...Object.fromEntries(
            resumed.map((r, i) => [
              `release ${RELEASE_DELAYS[i]} ms after the kill: waiter resumed`,
              `${Math.round(r.fromKill)} ms after the kill (${Math.round(r.fromRelease)} ms after the release)`,
            ]),
          ),
        });
        expect(report.doubleGrants).toBe(0);
        expect(report.lostUpdates).toBe(0);
        for (const r of resumed) expect(r.fromRelease).toBeLessThanOrEqual(1_000);
      } finally {
        counter.redis.disconnect();
      }
    },
    90_000,
  );
});
