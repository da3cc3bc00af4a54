/**
 * Destructive: kills the master, so it runs a PRIVATE sentinel topology on basePort 7200
 * (7200 master, 7201-7203 replicas, 7206-7208 sentinels), never the shared one.
 */
import Redis from 'ioredis';
import { RunningTopology, startTopology, stopNode, stopTopology } from '../../scripts/redis-topology';
import { uniqueKey } from '../support/topologies';
import { waitFor } from '../support/wait';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

const BASE_PORT = PRIVATE_PORTS.harnessSentinelFailover.base;

/** The master port a sentinel currently reports (one short-lived connection per call). */
async function reportedMasterPort(sentinel: { host: string; port: number }, name: string): Promise<number> {
  const client = new Redis({ ...sentinel, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const [, port] = (await client.call('SENTINEL', 'get-master-addr-by-name', name)) as [string, string];
    return Number(port);
  } finally {
    client.disconnect();
  }
}

describe('harness: sentinel failover (private topology)', () => {
  let topology: RunningTopology | undefined;
  let client: Redis | undefined;

  beforeAll(async () => {
    topology = await startTopology('sentinel', { basePort: BASE_PORT, name: 'harness-failover' });
    client = new Redis({ sentinels: topology.sentinels, name: topology.sentinelMasterName });
    // While the old master is down ioredis emits an 'error' per failed reconnect round; expected here.
    client.on('error', () => undefined);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    if (topology) await stopTopology(topology);
  });

  it('the same ioredis client keeps writing after the sentinels promote a replica', async () => {
    const t = topology!;
    const redis = client!;
    const name = t.sentinelMasterName!;
    const oldMaster = t.masters[0].port;

    const before = uniqueKey('failover');
    await redis.set(before, 'before');
    expect(await redis.wait(3, 5000)).toBe(3); // on every replica, so it survives the failover

    await stopNode(t, oldMaster);
    const newMaster = await waitFor(
      'the sentinels to promote a replica',
      async () => {
        const ports = await Promise.all(t.sentinels.map((s) => reportedMasterPort(s, name)));
        // Done when every sentinel agrees on a new master.
        return ports.every((p) => p !== oldMaster && p === ports[0]) ? ports[0] : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(t.replicas.map((r) => r.port)).toContain(newMaster);

    const after = uniqueKey('failover');
    await redis.set(after, 'after');
    expect(await redis.get(after)).toBe('after');
    expect(await redis.get(before)).toBe('before');
    expect(await redis.info('server')).toContain(`tcp_port:${newMaster}`);
  }, 60_000);
});
