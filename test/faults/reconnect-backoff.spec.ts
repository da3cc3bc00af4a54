import { createLockClient, type LockClient } from '../../lib';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { quietLogger, sleep, testPrefix } from '../support/engine';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/** A private single server, stopped and started again here (see scripts/redis-topology.ts). */
const BASE_PORT = PRIVATE_PORTS.reconnect.base;
const CLIENTS = 3;
/** Outages of 5 s and a little more each time, so the restarts land at different points of the back-off. */
const OUTAGES_MS = [5_000, 5_150, 5_300, 5_450, 5_600];

/**
 * In the fault suite, one file at a time: what it measures is a few round trips after a restart, and
 * the main suite's four workers on two cores once stretched those to 500-840 ms (87-188 ms alone).
 *
 * After an outage of several seconds, clients lock again within moments of Redis coming back, not
 * after a back-off that grew during the outage. With attempts 50 ms further apart each time up to
 * 1 s, five seconds in they were about 700 ms apart: a restart was noticed up to that long after,
 * and a key stayed blocked as long (the same wait followed a sentinel's promotion of a replica).
 */
describe('reconnecting after an outage', () => {
  const prefix = testPrefix();
  let topology: RunningTopology | undefined;
  const clients: LockClient[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    if (topology) await stopTopology(topology);
  });

  /** How long after the restart each client was granted a lock (trying every 10 ms; while disconnected an attempt fails at once). */
  const lockedAgain = (upAt: number, round: number) =>
    Promise.all(
      clients.map(async (c, i) => {
        for (;;) {
          const handle = await c
            .getLock(`after-${round}-${i}`)
            .tryLock({ waitTime: 0, leaseTime: 5_000 })
            .catch(() => undefined);
          if (handle) {
            const after = Date.now() - upAt;
            await handle.release();
            return after;
          }
          if (Date.now() - upAt > 10_000) return Infinity;
          await sleep(10);
        }
      }),
    );

  it('clients lock again within moments of Redis restarting after 5 s down, wherever the restart falls', async () => {
    topology = await startTopology('single', { basePort: BASE_PORT, name: 'reconnect' });
    const port = topology.masters[0].port;
    for (let i = 0; i < CLIENTS; i++) {
      clients.push(
        await createLockClient({
          connection: { type: 'single', host: '127.0.0.1', port },
          keyPrefix: prefix,
          logger: quietLogger,
        }),
      );
    }
    await Promise.all(clients.map((c, i) => c.getLock(`before-${i}`).withLock(() => undefined)));

    const slowest: number[] = [];
    for (const [round, outage] of OUTAGES_MS.entries()) {
      await stopTopology(topology);
      await sleep(outage);
      topology = await startTopology('single', { basePort: BASE_PORT, name: 'reconnect' });
      slowest.push(Math.max(...(await lockedAgain(Date.now(), round))));
    }
    process.stdout.write(
      `\nreconnect after 5-5.6 s outages: locked again at most ${slowest.join(' / ')} ms after each restart\n`,
    );
    // Attempts 200 ms apart at most: clients back within ~250 ms of a restart (79-247 ms measured). With the
    // 1 s cap, attempts ~700 ms apart, the restarts landing at different points between them were noticed
    // up to 718 ms late, about 350 ms on average. The median, so that one restart slowed by a busy machine
    // (588 ms once, in a full run) does not decide; the slowest still within the old cap's reach.
    const median = [...slowest].sort((a, b) => a - b)[Math.floor(slowest.length / 2)];
    expect(median).toBeLessThan(300);
    expect(Math.max(...slowest)).toBeLessThan(1_000);
  }, 90_000);
});
