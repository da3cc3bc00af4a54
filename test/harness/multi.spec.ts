import Redis from 'ioredis';
import { sharedTopology, uniqueKey } from '../support/topologies';

describe('harness: multi topology (independent masters for RedLock)', () => {
  const topology = sharedTopology('multi');
  let clients: Redis[];

  beforeAll(() => {
    clients = topology.masters.map((address) => new Redis(address));
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit()));
  });

  it('has five masters on basePort..+4', () => {
    expect(topology.masters.map((m) => m.port)).toEqual([0, 1, 2, 3, 4].map((i) => topology.basePort + i));
  });

  it('each answers as a master with no replicas, and they are distinct servers', async () => {
    const runIds = new Set<string>();
    for (const client of clients) {
      const [role, , replicas] = (await client.role()) as [string, number, unknown[]];
      expect(role).toBe('master');
      expect(replicas).toEqual([]);
      runIds.add(/run_id:(\w+)/.exec(await client.info('server'))![1]);
    }
    expect(runIds.size).toBe(5);
  });

  it('does not share data between masters', async () => {
    const key = uniqueKey('multi');
    await clients[0].set(key, 'only-here', 'EX', 60);
    expect(await clients[0].get(key)).toBe('only-here');
    for (const other of clients.slice(1)) expect(await other.get(key)).toBeNull();
  });
});
