import Redis from 'ioredis';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
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
 * rate before it. Private multi topology on port 7340 (7340-7344).
 */
const BASE_PORT = PRIVATE_PORTS.faultRedLock.base;
const RACERS = 8;
const PHASE_MS = 4_000;

describe('fault: RedLock, 2 of 5 masters SIGKILLed', () => {
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

  it('clients at their defaults: no double grant, no lost update, and at least half the rate after the kill', async () => {
    const ports = topology.masters.map((m) => m.port);
    const counterKey = `${prefix}:redlock-fault:counter`;
    const env = {
      REDLOCK_PORTS: ports.join(','),
      KEY_PREFIX: prefix,
      LOCK_NAME: 'redlock-fault',
      COUNTER_PORT: singlePort(),
      COUNTER_KEY: counterKey,
    };
    const procs = Array.from({ length: RACERS }, () => startWorker('redlock-racer.ts', env));
    workers.push(...procs);
    await Promise.all(procs.map((w) => w.waitFor('ready', 60_000)));

    await sleep(1_000); // warm-up: connections, subscriptions, JIT
    const began = performance.timeOrigin + performance.now();
    await sleep(PHASE_MS);
    const killedAt = performance.timeOrigin + performance.now();
    await signalNode(topology, ports[0], 'SIGKILL'); // the first master: every round's gate
    await signalNode(topology, ports[3], 'SIGKILL');
    await sleep(PHASE_MS);
    const stoppedAt = performance.timeOrigin + performance.now();
    for (const w of procs) w.send('stop');
    const results = (await Promise.all(procs.map((w) => w.result))) as RedLockRacerResult[];

    const sections = results.flatMap((r, proc) =>
      r.sections.map(([requested, start, end]) => ({ proc, requested, start, end })),
    );
    const errors = results.flatMap((r) => Object.entries(r.errors).map(([name, n]) => `${name} x${n}`));
    const before = sections.filter((s) => s.start >= began && s.start < killedAt).length;
    const after = sections.filter((s) => s.start >= killedAt && s.start < stoppedAt).length;
    const rateBefore = before / ((killedAt - began) / 1000);
    const rateAfter = after / ((stoppedAt - killedAt) / 1000);
    const firstAfter = sections.filter((s) => s.requested >= killedAt).sort((a, b) => a.start - b.start)[0];
    const outage = firstAfter ? firstAfter.start - killedAt : Infinity;
    const lost = sections.length - Number(await counter.get(counterKey));
    const crowded = results.reduce((sum, r) => sum + r.crowded, 0);
    process.stdout.write(
      `\n[fault] RedLock, 2 of 5 masters SIGKILLed, ${RACERS} processes, ioredis defaults\n` +
        `  rate before ${rateBefore.toFixed(0)}/s, after (outage included) ${rateAfter.toFixed(0)}/s; ` +
        `outage (kill -> first section requested after it) ${Math.round(outage)} ms\n` +
        `  ${sections.length} sections, double grants ${crowded}, lost updates ${lost}, ` +
        `timestamp overlaps ${timestampOverlaps([...sections].sort((a, b) => a.start - b.start))}; ` +
        `errors: ${errors.join(', ') || 'none'}\n`,
    );

    // Mutual exclusion, checked on the counter server: no clock involved.
    expect(crowded).toBe(0);
    expect(lost).toBe(0);
    expect(before).toBeGreaterThan(0);
    expect(rateAfter).toBeGreaterThanOrEqual(rateBefore / 2);
  }, 120_000);
});
