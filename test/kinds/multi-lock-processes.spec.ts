import { createLockClient, type ConnectionOptions } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { killAll, startTogether, startWorker, type Worker } from '../support/workers';

const ACCOUNTS = ['alice', 'bob', 'carol'];
const DURATION_MS = 3_000;

/**
 * Transfers between accounts across 8 OS processes, each holding both accounts' locks as one
 * MultiLock, named in the transfer's direction (A->B and B->A at once): nobody deadlocks (every
 * process finishes in time and made transfers) and no update is lost (each balance is exactly its
 * net change). On a Cluster the accounts' locks live in different slots (a MultiLock of single-slot
 * locks).
 */
describe.each([
  ['single', 'reentrant'],
  ['single', 'simple'],
  ['cluster', 'fair'],
] as const)('MultiLock across OS processes on %s, %s locks', (deployment, kind) => {
  const prefix = testPrefix();
  const workers: Worker[] = [];

  const topology = () => sharedTopology(deployment);
  afterEach(() => killAll(workers.splice(0)));

  it('transfers in opposite directions at once: no deadlock, no lost update', async () => {
    const connection: ConnectionOptions =
      deployment === 'single'
        ? { type: 'single', ...topology().masters[0] }
        : { type: 'cluster', nodes: topology().masters };
    const procs = Array.from({ length: 8 }, () =>
      startWorker('transfer-racer.ts', {
        CONNECTION: JSON.stringify(connection),
        KEY_PREFIX: prefix,
        LOCK_KIND: kind,
        ACCOUNTS: ACCOUNTS.join(','),
        START_AT: 'signal',
        DURATION_MS,
      }),
    );
    workers.push(...procs);
    await startTogether(procs);
    const deadline = new Promise<never>((_, reject) =>
      setTimeout(
        () => reject(new Error(`deadlocked: ${procs.map((w) => w.describe()).join('\n')}`)),
        DURATION_MS + 30_000,
      ).unref(),
    );
    const results = (await Promise.race([Promise.all(procs.map((w) => w.result)), deadline])) as {
      transfers: number;
      net: Record<string, number>;
    }[];
    expect(results.every((r) => r.transfers > 0)).toBe(true);

    const reader = await createLockClient({ connection, keyPrefix: prefix });
    try {
      for (const account of ACCOUNTS) {
        const expected = results.reduce((sum, r) => sum + r.net[account], 0);
        const balance = Number(await reader.redis.get(`${prefix}:balance:{${account}}`));
        expect({ account, balance }).toEqual({ account, balance: expected });
      }
    } finally {
      await reader.close();
    }
  }, 90_000);
});

/**
 * Two OS processes each take the lock of one name on two independent servers as one MultiLock, named
 * in opposite orders. The caller's order is not shared, so they must agree on another (the key, then
 * the server): otherwise each takes its first server's lock and waits for the other's until its
 * waitTime, every round. Every acquisition succeeds, and no update is lost.
 */
describe('MultiLock of one name on two servers across OS processes', () => {
  const prefix = testPrefix();
  const workers: Worker[] = [];
  afterEach(() => killAll(workers.splice(0)));

  it('named in opposite orders: no acquisition times out, no lost update', async () => {
    const ports = sharedTopology('multi')
      .masters.slice(0, 2)
      .map((m) => m.port);
    const counterKey = `${prefix}:counter`;
    const procs = [ports, [...ports].reverse()].map((order) =>
      startWorker('tied-names-racer.ts', {
        REDIS_PORTS: order.join(','),
        KEY_PREFIX: prefix,
        LOCK_NAME: 'tied',
        COUNTER_KEY: counterKey,
        COUNTER_PORT: ports[0],
        WAIT_MS: 10_000,
        START_AT: 'signal',
        DURATION_MS,
      }),
    );
    workers.push(...procs);
    await startTogether(procs);
    const results = (await Promise.all(procs.map((w) => w.result))) as { sections: number; timedOut: number }[];
    expect(results.map((r) => r.timedOut)).toEqual([0, 0]);
    expect(results.every((r) => r.sections > 0)).toBe(true);

    const counter = connect(ports[0]);
    try {
      expect(Number(await counter.get(counterKey))).toBe(results[0].sections + results[1].sections);
    } finally {
      await counter.quit();
    }
  }, 90_000);
});
