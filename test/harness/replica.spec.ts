import Redis from 'ioredis';
import { sharedTopology, uniqueKey } from '../support/topologies';

describe('harness: replica topology', () => {
  const topology = sharedTopology('replica');
  const [masterAddress] = topology.masters;
  let master: Redis;
  let replicas: Redis[];

  beforeAll(() => {
    master = new Redis(masterAddress);
    replicas = topology.replicas.map((address) => new Redis(address));
  });
  afterAll(async () => {
    await Promise.all([master, ...replicas].map((client) => client.quit()));
  });

  it('has three replicas of the master', async () => {
    expect(topology.replicas).toHaveLength(3);
    for (const replica of replicas) {
      const [role, host, port, state] = (await replica.role()) as [string, string, number, string];
      expect({ role, host, port, state }).toEqual({ role: 'slave', ...masterAddress, state: 'connected' });
    }
  });

  it('replicates a write on the master to every replica', async () => {
    const key = uniqueKey('replica');
    await master.set(key, 'replicated', 'EX', 60);
    // WAIT: the write has reached all three replicas before we read from them.
    expect(await master.wait(3, 5000)).toBe(3);
    for (const replica of replicas) expect(await replica.get(key)).toBe('replicated');
  });
});
