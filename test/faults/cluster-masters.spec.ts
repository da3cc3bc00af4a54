import { randomUUID } from 'node:crypto';
import Redis, { Cluster } from 'ioredis';
import { createLockClient } from '../../lib';
import { lockKeys } from '../../lib/internal';
import { ReplicaSync } from '../../lib/engine/redis/replica-sync';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { quietLogger } from '../support/engine';
import { clusterPromoted, clusterShard, sleep } from './support';

/**
 * A Cluster client stays 'ready' through a shard's failover, so what a standalone client does when its
 * connection is ready again (replica counts read afresh, failed renewals retried at once) is done when
 * the client's slot map names other masters. Private cluster on ports 7150-7155 (bus 17150-17155).
 */
describe('fault: a cluster shard fails over under a watched hold', () => {
  let topology: RunningTopology;

  beforeAll(async () => {
    topology = await startTopology('cluster', { basePort: PRIVATE_PORTS.faultClusterMasters.base });
  }, 90_000);
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  });

  it('the hold is renewed on the promoted master once the client sees the promotion, not at its next tick', async () => {
    const prefix = `masters-${randomUUID().slice(0, 8)}`;
    const name = 'renewed';
    const shard = await clusterShard(topology, lockKeys(prefix, name).lock);
    const survivor = topology.masters.find((m) => m.port !== shard.master.port)!;
    // A 60 s watchdog lease: renewed every 20 s, so the first tick after the grant comes long after the
    // failover below (about 3 s with cluster-node-timeout 2 s).
    const locks = await createLockClient({
      connection: { type: 'cluster', nodes: topology.masters },
      keyPrefix: prefix,
      watchdogTimeout: 60_000,
      logger: quietLogger,
    });
    const promoted = new Redis({ host: '127.0.0.1', port: shard.replica.port, maxRetriesPerRequest: 1 });
    try {
      const handle = await locks.getLock(name).lock(); // 'auto' replica sync: the replica has the grant
      await signalNode(topology, shard.master.port, 'SIGKILL');
      await clusterPromoted(topology, survivor, shard.replica.id);
      // Left alone, the promoted master's lease runs down from the grant's 60 s until the tick at 20 s.
      // The client re-reads the slot map every second: seeing the shard's new master, it renews at once.
      const key = lockKeys(prefix, name).lock;
      let lease = 0;
      for (const deadline = Date.now() + 10_000; lease <= 58_500 && Date.now() < deadline; await sleep(100)) {
        lease = await promoted.pttl(key);
      }
      expect(lease).toBeGreaterThan(58_500);
      expect(await handle.release()).toBe('released');
    } finally {
      promoted.disconnect();
      await locks.close();
    }
  }, 90_000);
});

describe('replica sync on a Cluster with no node for the key', () => {
  // A Cluster client before its first slot map (as between a master dropping out of its pool and the
  // promoted one being mapped): no master is known for any key, so no WAIT can vouch for a grant.
  const lazy = () => new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });

  it.each([
    ['auto', 'auto' as const],
    ["an enforced count with onFailure 'warn'", { replicas: 1, timeout: 100, onFailure: 'warn' as const }],
  ])(
    '%s: the grant is unverified (checked on the master serving the key), never believed as it is',
    async (_, setting) => {
      const cluster = lazy();
      try {
        const sync = new ReplicaSync(setting, cluster, 1_000, quietLogger);
        let released = false;
        const verdict = sync.afterGrant('a-lock', 'lock:{a-lock}', sync.epoch, async () => {
          released = true;
        });
        expect(await verdict).toBe('unverified');
        expect(released).toBe(false);
      } finally {
        cluster.disconnect();
      }
    },
  );
});
