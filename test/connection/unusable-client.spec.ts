import { randomUUID } from 'node:crypto';
import Redis, { Cluster } from 'ioredis';
import { createLockClient, LockClient, LockOptionsError, runInLockScope } from '../../lib';
import { quietLogger } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * ioredis `stringNumbers: true` turns every integer reply into a string. A fencing token of '10' would
 * sort before '9', and the engine would misread its scripts' replies (a full release still "locked").
 */
describe('ioredis stringNumbers', () => {
  it.each([
    [
      'an ioredis client',
      () => new Redis({ ...sharedTopology('single').masters[0], stringNumbers: true, lazyConnect: true }),
    ],
    [
      'an ioredis Cluster',
      () =>
        new Cluster(sharedTopology('cluster').masters, { redisOptions: { stringNumbers: true }, lazyConnect: true }),
    ],
  ])('on %s of yours is refused before any command', (_label, make) => {
    const client = make();
    try {
      expect(() => new LockClient({ redis: client, logger: quietLogger })).toThrow(LockOptionsError);
      expect(() => new LockClient({ redis: client, logger: quietLogger })).toThrow(
        /stringNumbers: true.*client\.duplicate\(\{ stringNumbers: false \}\)/,
      );
      expect(client.status).toBe('wait'); // never connected
    } finally {
      client.disconnect();
    }
  });

  it.each([
    ['single', () => ({ type: 'single' as const, ...sharedTopology('single').masters[0] })],
    ['cluster', () => ({ type: 'cluster' as const, nodes: sharedTopology('cluster').masters })],
  ])('in redisOptions of our own %s connections is overridden: tokens and counts are numbers', async (_type, base) => {
    const locks = await createLockClient({
      connection: { ...base(), redisOptions: { stringNumbers: true } },
      keyPrefix: `sn-${randomUUID().slice(0, 8)}`,
      logger: quietLogger,
    });
    try {
      await runInLockScope(async () => {
        const lock = locks.getLock('numbers');
        const outer = await lock.lock({ leaseTime: 10_000 });
        const inner = await lock.lock({ leaseTime: 10_000 });
        expect(typeof outer.fencingToken).toBe('number');
        expect(await lock.getHoldCount()).toBe(2);
        expect(typeof (await lock.remainTimeToLive())).toBe('number');
        await inner.release();
        await outer.release();
        expect(await lock.isLocked()).toBe(false);
      });
    } finally {
      await locks.close();
    }
  });
});

/** The application's own pub/sub connection passed as the lock connection (ioredis 5, RESP2). */
describe('a subscribed ioredis client', () => {
  it('gets LockOptionsError naming the lock at once, even with a wait, and nothing is written', async () => {
    const client = new Redis(sharedTopology('single').masters[0]);
    const plain = new Redis(sharedTopology('single').masters[0]);
    const keyPrefix = `sub-${randomUUID().slice(0, 8)}`;
    await client.subscribe(`${keyPrefix}:app-events`);
    const locks = new LockClient({ redis: client, keyPrefix, logger: quietLogger });
    try {
      const startedAt = Date.now();
      const error = await locks
        .getLock('orders')
        .lock({ waitTime: 5_000 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect(error).toMatchObject({ name: 'LockOptionsError', key: 'orders' });
      expect((error as Error).message).toMatch(/subscribed to a channel.*client\.duplicate\(\)/);
      expect(Date.now() - startedAt).toBeLessThan(1_000);
      expect(await plain.keys(`${keyPrefix}:*`)).toEqual([]);
    } finally {
      await locks.close();
      client.disconnect();
      plain.disconnect();
    }
  });
});
