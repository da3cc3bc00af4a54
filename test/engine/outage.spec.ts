import { LockLostError, RedisUnavailableError } from '../../lib';
import { restartNode, startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { eventually, lockClient, testPrefix, type TestClient } from '../support/engine';

/** Stops and restarts Redis, so it runs on a private server (port 7220), never the shared one. */
describe('Redis outage', () => {
  let topology: RunningTopology;
  let client: TestClient;
  let port: number;
  const operationTimeout = 1_000;

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: 7220 });
    port = topology.masters[0].port;
    client = lockClient({ port, keyPrefix: testPrefix(), operationTimeout, watchdogTimeout: 900 });
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    if (topology) await stopTopology(topology);
  });

  it('lock and tryLock fail with RedisUnavailableError within the bound while Redis is down, and work again after', async () => {
    const lock = client.locks.getLock('outage');
    const held = await lock.lock(); // watchdog lease 900 ms
    await stopNode(topology, port);

    for (const attempt of [
      () => lock.tryLock(),
      () => lock.lock({ waitTime: 10_000 }),
      () => client.locks.getLock('other').lock(),
    ]) {
      const started = Date.now();
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect((error as RedisUnavailableError).name).toBe('RedisUnavailableError');
      expect(Date.now() - started).toBeLessThan(operationTimeout + 2_000);
    }

    // Unreachable until the lease must have run out: the holder is told it lost the lock.
    await eventually(() => held.signal.aborted, 5_000);
    expect((held.signal.reason as LockLostError).reason).toBe('unreachable');

    await restartNode(topology, port);
    await eventually(async () => (await lock.tryLock({ leaseTime: 1_000 }).catch(() => null)) !== null, 15_000);
    expect(await lock.isLocked()).toBe(true);
    expect(await lock.forceUnlock()).toBe(true);
  }, 60_000);
});
