import Redis from 'ioredis';
import { sharedTopology, uniqueKey } from '../support/topologies';

describe('harness: sentinel topology', () => {
  const topology = sharedTopology('sentinel');
  let client: Redis;

  beforeAll(() => {
    client = new Redis({ sentinels: topology.sentinels, name: topology.sentinelMasterName });
  });
  afterAll(async () => {
    await client.quit();
  });

  it('has a master, three replicas and three sentinels monitoring "mymaster"', () => {
    expect(topology.sentinelMasterName).toBe('mymaster');
    expect(topology.masters).toHaveLength(1);
    expect(topology.replicas).toHaveLength(3);
    expect(topology.sentinels).toHaveLength(3);
  });

  it('every sentinel names the master', async () => {
    for (const address of topology.sentinels) {
      const sentinel = new Redis(address);
      try {
        const addr = await sentinel.call('SENTINEL', 'get-master-addr-by-name', 'mymaster');
        expect(addr).toEqual([topology.masters[0].host, String(topology.masters[0].port)]);
      } finally {
        sentinel.disconnect(); // Redis 7.0 sentinels do not implement QUIT
      }
    }
  });

  it('an ioredis sentinel client writes and reads through the master', async () => {
    const key = uniqueKey('sentinel');
    await client.set(key, 'via-sentinel', 'EX', 60);
    expect(await client.get(key)).toBe('via-sentinel');
    expect(await client.info('server')).toContain(`tcp_port:${topology.masters[0].port}`);
  });
});
