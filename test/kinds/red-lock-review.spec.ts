import { RedLock } from '../../lib';
import { lockClient, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * RedLock on paths the happy tests do not take: what its handle says is checked against the masters
 * themselves (their PTTLs), on the shared five independent masters.
 */
describe('RedLock review', () => {
  const prefix = testPrefix();
  const clientsFor = async (options: { watchdogTimeout?: number } = {}): Promise<TestClient[]> => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const clients = ports.map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000, ...options }));
    // Connected first: a vote bounded in time must not lose its round to a slow connect on a busy machine.
    await Promise.all(clients.map((c) => c.redis.ping()));
    return clients;
  };
  const closeAll = (clients: TestClient[]) => Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  const pttls = (clients: TestClient[], name: string) =>
    Promise.all(clients.map((c) => c.redis.pttl(c.locks.getSimpleLock(name).keys.lock)));
  /** What the quorum-th (3rd of 5) longest-held master still has. */
  const quorumPttl = async (clients: TestClient[], name: string) =>
    (await pttls(clients, name)).sort((a, b) => b - a)[2];

  it('extend() with no lease on a RedLock taken with a leaseTime renews by that lease, and says so', async () => {
    const clients = await clientsFor({ watchdogTimeout: 30_000 });
    try {
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'extend-own-lease',
      ).lock({ leaseTime: 2_000 });
      await handle.extend();
      // The masters renewed by the lock's own lease (2 s), not by the watchdog timeout (30 s) ...
      const held = await quorumPttl(clients, 'extend-own-lease');
      expect(held).toBeGreaterThan(0);
      expect(held).toBeLessThanOrEqual(2_000);
      // ... and the handle must not promise more than that.
      expect(handle.validity).toBeLessThanOrEqual(held);
      expect(await handle.release()).toBe('released');
    } finally {
      await closeAll(clients);
    }
  }, 30_000);
});
