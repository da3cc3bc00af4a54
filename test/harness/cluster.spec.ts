import Redis, { Cluster } from 'ioredis';
import { sharedTopology, uniqueKey } from '../support/topologies';

type SlotRange = [start: number, end: number, master: [host: string, port: number, id: string], ...replicas: unknown[]];

describe('harness: cluster topology', () => {
  const topology = sharedTopology('cluster');
  let cluster: Cluster;

  beforeAll(() => {
    cluster = new Cluster(topology.masters);
  });
  afterAll(async () => {
    await cluster.quit();
  });

  it('has three masters and three replicas over ports basePort..+5', () => {
    expect(topology.masters).toHaveLength(3);
    expect(topology.replicas).toHaveLength(3);
    const ports = [...topology.masters, ...topology.replicas].map((a) => a.port).sort((a, b) => a - b);
    expect(ports).toEqual([0, 1, 2, 3, 4, 5].map((i) => topology.basePort + i));
  });

  it('writes and reads keys landing on all three masters', async () => {
    const ranges = (await cluster.call('CLUSTER', 'SLOTS')) as SlotRange[];
    const ownerOf = (slot: number): number => ranges.find(([start, end]) => slot >= start && slot <= end)![2][1];

    // One key per master: draw random keys until each master owns one.
    const keyByMaster = new Map<number, string>();
    while (keyByMaster.size < topology.masters.length) {
      const key = uniqueKey('cluster');
      const slot = Number(await cluster.call('CLUSTER', 'KEYSLOT', key));
      if (!keyByMaster.has(ownerOf(slot))) keyByMaster.set(ownerOf(slot), key);
    }
    expect([...keyByMaster.keys()].sort()).toEqual(topology.masters.map((m) => m.port).sort());

    for (const [port, key] of keyByMaster) {
      await cluster.set(key, `on-${port}`, 'EX', 60);
      expect(await cluster.get(key)).toBe(`on-${port}`);
      // The key really lives on that master: a plain client there reads it without a MOVED error.
      const direct = new Redis({ host: '127.0.0.1', port });
      try {
        expect(await direct.get(key)).toBe(`on-${port}`);
      } finally {
        await direct.quit();
      }
    }
  });
});
