import { runScript } from '../../lib/engine/scripts';
import { connect, testPrefix } from '../support/engine';
import type Redis from 'ioredis';

/** Each Lua script called directly on a real Redis, with random keys. */
describe('lua scripts', () => {
  let redis: Redis;
  const prefix = testPrefix();
  let n = 0;
  const keys = () => {
    const base = `${prefix}:{s${++n}}`;
    return { lock: base, fence: `${base}:fence`, channel: `${base}:unlock` };
  };

  beforeAll(() => (redis = connect()));
  afterAll(() => redis.quit());

  it('lock-2: acquires with a new token, re-enters with the same token, refuses others with the PTTL', async () => {
    const k = keys();
    expect(await runScript(redis, 'lock', [k.lock, k.fence], [5000, 'a'])).toEqual([0, 1]);
    expect(await runScript(redis, 'lock', [k.lock, k.fence], [5000, 'a'])).toEqual([1, 1]);
    expect(await redis.hget(k.lock, 'a')).toBe('2');
    const [status, pttl] = await runScript<[number, number]>(redis, 'lock', [k.lock, k.fence], [5000, 'b']);
    expect(status).toBe(2);
    expect(pttl).toBeGreaterThan(4000);
    await redis.del(k.lock);
    expect(await runScript(redis, 'lock', [k.lock, k.fence], [5000, 'b'])).toEqual([0, 2]);
  });

  it('lock-2: re-entry never shortens a longer lease', async () => {
    const k = keys();
    await runScript(redis, 'lock', [k.lock, k.fence], [60_000, 'a']);
    await runScript(redis, 'lock', [k.lock, k.fence], [1_000, 'a']);
    expect(await redis.pttl(k.lock)).toBeGreaterThan(50_000);
  });

  it('unlock-2: decrements, releases with one message, and tells not-locked from not-owner', async () => {
    const k = keys();
    const sub = redis.duplicate();
    const messages: string[] = [];
    sub.on('message', (_channel, message) => messages.push(message));
    await sub.subscribe(k.channel);
    try {
      expect(await runScript(redis, 'unlock', [k.lock, k.channel], ['a', 5000, 'publish', 'm'])).toBe(-1);
      await runScript(redis, 'lock', [k.lock, k.fence], [5000, 'a']);
      await runScript(redis, 'lock', [k.lock, k.fence], [5000, 'a']);
      expect(await runScript(redis, 'unlock', [k.lock, k.channel], ['b', 5000, 'publish', 'm'])).toBe(-2);
      expect(await runScript(redis, 'unlock', [k.lock, k.channel], ['a', 5000, 'publish', 'm'])).toBe(0);
      expect(messages).toEqual([]);
      expect(await runScript(redis, 'unlock', [k.lock, k.channel], ['a', 5000, 'publish', 'm'])).toBe(1);
      expect(await redis.exists(k.lock)).toBe(0);
      await new Promise((r) => setTimeout(r, 50));
      expect(messages).toEqual(['m']);
    } finally {
      await sub.quit();
    }
  });

  it('renew-many-n: extends only for the owner', async () => {
    const k = keys();
    await runScript(redis, 'lock', [k.lock, k.fence], [1000, 'a']);
    expect(await runScript(redis, 'renew-many', [k.lock], ['hash', 30_000, 'b'])).toEqual([0]);
    expect(await redis.pttl(k.lock)).toBeLessThanOrEqual(1000);
    expect(await runScript(redis, 'renew-many', [k.lock], ['hash', 30_000, 'a'])).toEqual([1]);
    expect(await redis.pttl(k.lock)).toBeGreaterThan(20_000);
  });

  it('force-unlock-2: deletes whoever holds it', async () => {
    const k = keys();
    await runScript(redis, 'lock', [k.lock, k.fence], [5000, 'a']);
    expect(await runScript(redis, 'force-unlock', [k.lock, k.channel], ['publish', 'f'])).toBe(1);
    expect(await runScript(redis, 'force-unlock', [k.lock, k.channel], ['publish', 'f'])).toBe(0);
  });
});
