import Redis from 'ioredis';
import { sharedTopology, uniqueKey } from '../support/topologies';

describe('harness: single topology', () => {
  const topology = sharedTopology('single');
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(topology.masters[0]);
  });
  afterAll(async () => {
    await redis.quit();
  });

  it('is one master on 127.0.0.1', () => {
    expect(topology.masters).toEqual([{ host: '127.0.0.1', port: topology.basePort }]);
    expect(topology.nodes.map((n) => n.role)).toEqual(['master']);
  });

  it('writes and reads a key', async () => {
    const key = uniqueKey('single');
    await redis.set(key, 'value', 'EX', 60);
    expect(await redis.get(key)).toBe('value');
    expect((await redis.role())[0]).toBe('master');
  });
});
