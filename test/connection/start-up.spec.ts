import Redis from 'ioredis';
import { createLockClient, RedisUnavailableError, type LockClient } from '../../lib';
import { portShift, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { quietLogger, sleep, testPrefix } from '../support/engine';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/** A private single server, started mid-test (see scripts/redis-topology.ts): nothing listens on it before. */
const BASE_PORT = PRIVATE_PORTS.startUp.base;
const PORT = BASE_PORT + portShift();

/**
 * Connecting at start-up rides out failed attempts within its budget (3 operation timeouts): a Redis
 * that is still starting (a container started next to the app) is waited for, and one that never
 * comes up is reported with its own error once the budget is spent, leaving nothing connecting.
 */
describe('connecting at start-up', () => {
  const prefix = testPrefix();
  let topology: RunningTopology | undefined;
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  });

  it('a Redis that never answers: RedisUnavailableError after the budget, naming the refused connection; nothing keeps connecting', async () => {
    const connectionName = `never-${prefix.slice(-6)}`;
    const startedAt = Date.now();
    const error = await createLockClient({
      connection: { type: 'single', host: '127.0.0.1', port: PORT, redisOptions: { connectionName } },
      keyPrefix: prefix,
      operationTimeout: 300,
      logger: quietLogger,
    }).catch((e: unknown) => e);
    const elapsed = Date.now() - startedAt;
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toMatch(
      new RegExp(`^Could not connect to Redis at 127\\.0\\.0\\.1:${PORT} within 900 ms: connect ECONNREFUSED`),
    );
    expect(elapsed).toBeGreaterThanOrEqual(850); // tried again until the budget was spent
    expect(elapsed).toBeLessThan(10_000);

    // Once the server is up, nothing of that client connects to it.
    topology = await startTopology('single', { basePort: BASE_PORT, name: 'start-up' });
    const probe = new Redis({ port: PORT, maxRetriesPerRequest: 1 });
    try {
      await sleep(1_500); // past the reconnect back-off (at most 1 s)
      const clients = (await probe.call('CLIENT', 'LIST')) as string;
      expect(clients).not.toContain(` name=${connectionName} `);
    } finally {
      probe.disconnect();
    }
    await stopTopology(topology);
    topology = undefined;
  }, 60_000);

  it('a Redis that comes up while the client connects: the client is ready once it answers, and locks', async () => {
    const startedAt = Date.now();
    const connecting = createLockClient({
      connection: { type: 'single', host: '127.0.0.1', port: PORT },
      keyPrefix: prefix,
      logger: quietLogger,
    });
    const outcome = connecting.then(
      () => 'connected',
      (error: Error) => `failed after ${Date.now() - startedAt} ms: ${error.message}`,
    );
    await sleep(500); // refused meanwhile, more than once
    topology = await startTopology('single', { basePort: BASE_PORT, name: 'start-up' });
    expect(await outcome).toBe('connected');
    const locks: LockClient = await connecting;
    try {
      const handle = await locks.getLock('after-start').lock({ leaseTime: 5_000 });
      expect(await handle.release()).toBe('released');
    } finally {
      await locks.close();
    }
  }, 60_000);
});
