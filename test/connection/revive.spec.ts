import { once } from 'node:events';
import type Redis from 'ioredis';
import { createLockClient, RedisUnavailableError, type LockClient } from '../../lib';
import { connect, eventually, lockClient, singlePort, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * A connection the library opened that ends without the library closing it (ioredis gives a
 * sentinel client up when a failover notice arrives while it reconnects) is connected again: the
 * process goes on locking, and its waiters are still woken. One the library closed stays closed.
 */
describe('connections that end on their own come back', () => {
  const prefix = testPrefix();
  let locks: LockClient;
  let other: TestClient;

  beforeAll(async () => {
    locks = await createLockClient({
      connection: { type: 'single', host: '127.0.0.1', port: singlePort() },
      keyPrefix: prefix,
      logger: { warn: () => undefined, error: () => undefined },
    });
    other = lockClient({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await locks?.close();
    await other?.close();
  });

  it('the lock connection: ended behind the client’s back, it is ready again and locks', async () => {
    const redis = locks.redis as Redis;
    const ended = once(redis, 'end');
    redis.disconnect(); // what ioredis does to a sentinel client in that race: status 'end', no reconnect of its own
    await ended;
    await eventually(() => redis.status === 'ready', 5_000);
    const handle = await locks.getLock('after-revival').lock({ leaseTime: 5_000 });
    await handle.release();
  });

  it('the subscriber: ended while a waiter waits, the waiter is still woken by the release', async () => {
    const held = await other.locks.getLock('woken').lock({ leaseTime: 30_000 });
    const waiting = locks.getLock('woken').lock({ waitTime: 20_000 });
    await sleep(200); // parked, subscribed
    const subscriber = (locks as unknown as { pubsub: { connection: Redis } }).pubsub.connection;
    const ended = once(subscriber, 'end');
    subscriber.disconnect();
    await ended;
    await eventually(() => subscriber.status === 'ready', 5_000);
    await sleep(100);
    const releasedAt = Date.now();
    await held.release();
    const handle = await waiting;
    expect(Date.now() - releasedAt).toBeLessThan(2_000); // woken, not left to the 30 s lease or the wait
    await handle.release();
  });

  it('a release sent while the lock connection has ended (before its revival) lands once it is back: released, not given up', async () => {
    const lock = locks.getLock('released-across-end');
    const handle = await lock.lock({ leaseTime: 60_000 });
    const redis = locks.redis as Redis;
    const ended = once(redis, 'end');
    redis.disconnect();
    await ended; // 'end' now; the revival comes 50 ms later
    expect(await handle.release()).toBe('released');
    expect(await other.locks.getLock('released-across-end').isLocked()).toBe(false); // not left to the minute-long lease
  });

  it('a release or a wait on a connection of the application that ended fails at once: nobody revives it', async () => {
    const client = connect(singlePort());
    const yours = await createLockClient({ connection: { type: 'client', client }, keyPrefix: prefix });
    try {
      const handle = await yours.getLock('ended-for-good').lock({ leaseTime: 60_000 });
      const ended = once(client, 'end');
      client.disconnect();
      await ended;
      let started = Date.now();
      await expect(handle.release()).rejects.toThrow(RedisUnavailableError);
      expect(Date.now() - started).toBeLessThan(1_000);
      // Nor does a wait sit it out: no attempt can get through any more.
      started = Date.now();
      await expect(yours.getLock('ended-for-good-too').lock({ waitTime: 10_000 })).rejects.toThrow(
        RedisUnavailableError,
      );
      expect(Date.now() - started).toBeLessThan(1_000);
    } finally {
      await yours.close();
      await other.redis.del(`${prefix}:{ended-for-good}`);
    }
  });

  it('a client the library closed stays closed', async () => {
    const closed = await createLockClient({
      connection: { type: 'single', host: '127.0.0.1', port: singlePort() },
      keyPrefix: prefix,
    });
    const redis = closed.redis as Redis;
    await closed.close();
    await sleep(1_500);
    expect(redis.status).toBe('end');
  });
});
