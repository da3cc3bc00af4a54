import Redis from 'ioredis';
import {
  restartNode,
  signalNode,
  startTopology,
  stopTopology,
  type RunningTopology,
} from '../../scripts/redis-topology';
import { LockClient, RedLock } from '../../lib';
import { silentLogger } from '../../scripts/tooling';
import { singlePort, sleep, testPrefix } from '../support/engine';
import { killAll, startWorker, type Worker } from '../support/workers';
import { timestampOverlaps } from './support';
import type { RedLockRacerResult } from '../workers/redlock-racer';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Issue #13, RedLock with 2 of its 5 masters SIGKILLed mid-run: 8 processes (test/workers/redlock-racer.ts)
 * whose ioredis clients are at their defaults (offline queue on: a command to a dead master waits
 * for its reconnect) race on one name, with a racy counter on the shared single server. No critical
 * section finds another process inside, no update is lost, and the rate after the kill is at least half the
 * rate before it. Then the same with `restartQuarantine` and 2 masters restarted empty instead: the three
 * others keep the lock going while the two are kept out, and the two vote again after it. Private multi
 * topology on port 7340 (7340-7344).
 */
const BASE_PORT = PRIVATE_PORTS.faultRedLock.base;
const RACERS = 8;
const PHASE_MS = 4_000;

describe('fault: RedLock, 2 of 5 masters SIGKILLed or restarted empty', () => {
  const prefix = testPrefix();
  let topology: RunningTopology;
  let counter: Redis;
  const workers: Worker[] = [];

  beforeAll(async () => {
    topology = await startTopology('multi', { basePort: BASE_PORT });
    counter = new Redis({ host: '127.0.0.1', port: singlePort(), maxRetriesPerRequest: 1 });
  }, 60_000);
  afterEach(() => killAll(workers.splice(0)));
  afterAll(async () => {
    counter?.disconnect();
    if (topology) await stopTopology(topology);
  });

  interface RaceOutcome {
    rateBefore: number;
    rateAfter: number;
    outage: number;
    sections: number;
    crowded: number;
    lost: number;
    errors: string[];
  }

  /**
   * RACERS processes race on `name` for PHASE_MS, then `fault` runs, then PHASE_MS more. Rates are sections
   * started per second in each phase; the outage is the fault to the first section requested after it.
   */
  const race = async (
    name: string,
    extraEnv: Record<string, string>,
    fault: () => Promise<void>,
  ): Promise<RaceOutcome> => {
    const ports = topology.masters.map((m) => m.port);
    const counterKey = `${prefix}:${name}:counter`;
    const env = {
      REDLOCK_PORTS: ports.join(','),
      KEY_PREFIX: prefix,
      LOCK_NAME: name,
      COUNTER_PORT: singlePort(),
      COUNTER_KEY: counterKey,
      ...extraEnv,
    };
    const procs = Array.from({ length: RACERS }, () => startWorker('redlock-racer.ts', env));
    workers.push(...procs);
    await Promise.all(procs.map((w) => w.waitFor('ready', 60_000)));

    await sleep(1_000); // warm-up: connections, subscriptions, JIT
    const began = performance.timeOrigin + performance.now();
    await sleep(PHASE_MS);
    const faultAt = performance.timeOrigin + performance.now();
    await fault();
    await sleep(PHASE_MS);
    const stoppedAt = performance.timeOrigin + performance.now();
    for (const w of procs) w.send('stop');
    const results = (await Promise.all(procs.map((w) => w.result))) as RedLockRacerResult[];

    const sections = results.flatMap((r, proc) =>
      r.sections.map(([requested, start, end]) => ({ proc, requested, start, end })),
    );
    const errors = results.flatMap((r) => Object.entries(r.errors).map(([error, n]) => `${error} x${n}`));
    const before = sections.filter((s) => s.start >= began && s.start < faultAt).length;
    const after = sections.filter((s) => s.start >= faultAt && s.start < stoppedAt).length;
    const firstAfter = sections.filter((s) => s.requested >= faultAt).sort((a, b) => a.start - b.start)[0];
    const outcome: RaceOutcome = {
      rateBefore: before / ((faultAt - began) / 1000),
      rateAfter: after / ((stoppedAt - faultAt) / 1000),
      outage: firstAfter ? firstAfter.start - faultAt : Infinity,
      sections: sections.length,
      crowded: results.reduce((sum, r) => sum + r.crowded, 0),
      lost: sections.length - Number(await counter.get(counterKey)),
      errors,
    };
    process.stdout.write(
      `  rate before ${outcome.rateBefore.toFixed(0)}/s, after (outage included) ${outcome.rateAfter.toFixed(0)}/s; ` +
        `outage (fault -> first section requested after it) ${Math.round(outcome.outage)} ms\n` +
        `  ${outcome.sections} sections, double grants ${outcome.crowded}, lost updates ${outcome.lost}, ` +
        `timestamp overlaps ${timestampOverlaps([...sections].sort((a, b) => a.start - b.start))}; ` +
        `errors: ${errors.join(', ') || 'none'}\n`,
    );
    return outcome;
  };

  it('clients at their defaults: no double grant, no lost update, and at least half the rate after the kill', async () => {
    const ports = topology.masters.map((m) => m.port);
    process.stdout.write(`\n[fault] RedLock, 2 of 5 masters SIGKILLed, ${RACERS} processes, ioredis defaults\n`);
    const outcome = await race('redlock-fault', {}, async () => {
      await signalNode(topology, ports[0], 'SIGKILL'); // the first master: every round's gate
      await signalNode(topology, ports[3], 'SIGKILL');
    });
    // Mutual exclusion, checked on the counter server: no clock involved.
    expect(outcome.crowded).toBe(0);
    expect(outcome.lost).toBe(0);
    expect(outcome.rateBefore).toBeGreaterThan(0);
    expect(outcome.rateAfter).toBeGreaterThanOrEqual(outcome.rateBefore / 2);
  }, 120_000);

  it('restartQuarantine on, 2 of 5 masters restarted empty: no double grant, the other three keep the rate, and the two vote again after it', async () => {
    const ports = topology.masters.map((m) => m.port);
    const quarantine = 3_000;
    // The masters the test before killed come back, and every master is up longer than the quarantine.
    await restartNode(topology, ports[0]);
    await restartNode(topology, ports[3]);
    await sleep(quarantine + 3_000); // the library reads uptime in whole seconds, less one
    process.stdout.write(
      `\n[fault] RedLock with restartQuarantine ${quarantine} ms, 2 of 5 masters restarted empty, ${RACERS} processes\n`,
    );
    const outcome = await race('redlock-restart', { RESTART_QUARANTINE: String(quarantine) }, async () => {
      await restartNode(topology, ports[1]);
      await restartNode(topology, ports[4]);
    });
    expect(outcome.crowded).toBe(0);
    expect(outcome.lost).toBe(0);
    expect(outcome.rateBefore).toBeGreaterThan(0);
    // Three masters are left that may vote: a quorum, so the lock keeps its rate.
    expect(outcome.rateAfter).toBeGreaterThanOrEqual(outcome.rateBefore / 2);
    // Once up longer than the quarantine, the restarted masters vote again: with them, a majority that
    // needs both of them.
    await sleep(quarantine);
    const clients = [ports[1], ports[4], ports[2]].map(
      (port) =>
        new LockClient({ redis: new Redis({ host: '127.0.0.1', port }), keyPrefix: prefix, logger: silentLogger }),
    );
    try {
      await clients[2].redis.set(clients[2].getSimpleLock('redlock-rejoin').keys.lock, 'someone-else', 'PX', 60_000);
      const redLock = new RedLock(clients, 'redlock-rejoin', { restartQuarantine: quarantine });
      // Fresh clients: their first connections and the reads of the masters' starts come first (a busy
      // machine may take longer than one instance timeout for that: the wait covers it).
      const handle = await redLock.lock({ leaseTime: 5_000, waitTime: 5_000 });
      await handle.release();
    } finally {
      await Promise.all(clients.map(async (c) => (await c.close(), c.redis.disconnect())));
    }
  }, 120_000);
});
