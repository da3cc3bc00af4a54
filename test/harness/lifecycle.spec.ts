/**
 * The harness's own process handling: stop/restart one node, reclaiming leftovers, and that
 * stopTopology leaves no recorded pid alive. Destructive, so it runs a PRIVATE replica topology
 * on basePort 7210 (7210 master, 7211-7213 replicas).
 */
import * as fs from 'node:fs';
import Redis from 'ioredis';
import {
  isPidAlive,
  isPortFree,
  readTopology,
  restartNode,
  RunningTopology,
  signalNode,
  startTopology,
  stopNode,
  stopTopology,
} from '../../scripts/redis-topology';
import { waitFor } from '../support/wait';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

const BASE_PORT = PRIVATE_PORTS.harnessLifecycle.base;

async function masterLinkStatus(port: number): Promise<string | undefined> {
  const client = new Redis({ port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return /master_link_status:(\w+)/.exec(await client.info('replication'))?.[1];
  } finally {
    client.disconnect();
  }
}

describe('harness: topology lifecycle (private topology)', () => {
  let topology: RunningTopology;

  beforeAll(async () => {
    topology = await startTopology('replica', { basePort: BASE_PORT, name: 'harness-lifecycle' });
  }, 60_000);

  afterAll(async () => {
    await stopTopology(topology); // no-op if the last test already stopped it
  });

  it('records every node, with its pid, in topology.json', () => {
    expect(readTopology(topology.stateDir)).toEqual(topology);
    expect(topology.nodes).toHaveLength(4);
    for (const node of topology.nodes) expect(isPidAlive(node.pid)).toBe(true);
  });

  it('stopNode stops one node; restartNode brings it back on the same port with a new pid', async () => {
    const port = topology.replicas[0].port;
    const oldPid = topology.nodes.find((n) => n.address.port === port)!.pid;

    await stopNode(topology, port);
    expect(isPidAlive(oldPid)).toBe(false);
    expect(await isPortFree(port)).toBe(true);

    await restartNode(topology, port);
    const newPid = topology.nodes.find((n) => n.address.port === port)!.pid;
    expect(newPid).not.toBe(oldPid);
    expect(isPidAlive(newPid)).toBe(true);
    expect(readTopology(topology.stateDir).nodes.find((n) => n.address.port === port)!.pid).toBe(newPid);
    // Restarted from its own redis.conf, so it is a replica of the same master again.
    await waitFor('the restarted replica to resync', async () =>
      (await masterLinkStatus(port)) === 'up' ? true : undefined,
    );
  });

  it('startTopology on the same ports first stops what an earlier run left behind', async () => {
    const leftover = topology.nodes.map((n) => n.pid);
    topology = await startTopology('replica', { basePort: BASE_PORT, name: 'harness-lifecycle' });
    expect(leftover.filter(isPidAlive)).toEqual([]);
    for (const node of topology.nodes) expect(isPidAlive(node.pid)).toBe(true);
  }, 60_000);

  it('stopTopology leaves none of the recorded pids alive, even a SIGSTOPped node', async () => {
    const pids = topology.nodes.map((n) => n.pid);
    await signalNode(topology, topology.replicas[1].port, 'SIGSTOP'); // a hung node must not survive
    await stopTopology(topology);
    expect(pids.filter(isPidAlive)).toEqual([]);
    expect(fs.existsSync(topology.stateDir)).toBe(false);
    for (const node of topology.nodes) expect(await isPortFree(node.address.port)).toBe(true);
  });
});
