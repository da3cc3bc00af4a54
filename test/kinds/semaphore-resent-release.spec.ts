import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient } from '../../lib';
import { quietLogger } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * An application's own ioredis client, at its defaults, sends a command again on its new connection
 * when the old one died before the reply came. A semaphore release whose reply was lost so runs twice;
 * the caller hears the second run's reply, and must learn what the first one did: 'released'.
 */
describe("a semaphore release re-sent by the application's ioredis client after its reply was lost", () => {
  let proxy: ReplyDroppingProxy;
  let redis: Redis;
  let locks: LockClient;
  const keyPrefix = `sr-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    proxy = await ReplyDroppingProxy.start(sharedTopology('single').masters[0]);
    redis = new Redis({ host: '127.0.0.1', port: proxy.port }); // ioredis defaults: re-sends
    locks = new LockClient({ redis, keyPrefix, logger: quietLogger });
    await redis.ping();
  });
  afterAll(async () => {
    await locks.close();
    redis.disconnect();
    await proxy.close();
  });

  it.each([
    ['a watched hold', undefined],
    ['a hold with a lease of its own', 30_000],
  ])("%s: the release reports 'released', no lockLost, and the permits are free", async (_what, leaseTime) => {
    const lost: unknown[] = [];
    const onLost = (error: unknown) => lost.push(error);
    locks.on('lockLost', onLost);
    try {
      const semaphore = locks.getSemaphore(`resent-${leaseTime ?? 'watched'}`, { permits: 3 });
      const other = await semaphore.acquire({ leaseTime: 30_000 });
      const handle = await semaphore.acquire({ permits: 2, leaseTime });
      const dropped = proxy.dropped;
      proxy.dropNextReply(/released/);
      expect(await handle.release()).toBe('released');
      expect(proxy.dropped).toBe(dropped + 1); // the reply was lost, and the release sent again
      expect(handle.isLost).toBe(false);
      expect(handle.signal.aborted).toBe(false);
      expect(await semaphore.availablePermits()).toBe(2);
      expect(await other.release()).toBe('released');
      expect(await semaphore.availablePermits()).toBe(3);
      expect(lost).toEqual([]);
    } finally {
      locks.off('lockLost', onLost);
    }
  });
});
