import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient, type LockHandle } from '../../lib';
import { RedisPubSub } from '../../lib/engine/waiting/pubsub';
import { eventually, quietLogger, sleep } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * Two waits of one owner in one process (two lock() calls of an explicit owner, or of one scope, at
 * once) queued behind another holder. The release hands the lock to the first in its message; the
 * second, retrying meanwhile, finds its owner holding the lock and re-enters (Redis counts 2). Whatever
 * order this process learns of the two grants in, both are holds Redis has: neither holder may be
 * told it lost the lock.
 */
describe('FairLock: two waits of one owner in one process', () => {
  let proxy: ReplyDroppingProxy;
  let redis: Redis;
  let lateSubscriber: Redis;
  let locks: LockClient;
  let other: LockClient;
  let otherRedis: Redis;
  const keyPrefix = `fso-${randomUUID().slice(0, 8)}`;
  const options = { staleWaiterTimeout: 600, acceptanceLease: 3_000 }; // retries every 200 ms

  beforeAll(async () => {
    const upstream = sharedTopology('single').masters[0];
    proxy = await ReplyDroppingProxy.start(upstream);
    redis = new Redis({ ...upstream, maxRetriesPerRequest: 1 });
    otherRedis = new Redis({ ...upstream, maxRetriesPerRequest: 1 });
    // This process's subscriber goes through the proxy: the test holds its messages back.
    lateSubscriber = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null });
    const pubsub = new RedisPubSub(lateSubscriber, false, true);
    locks = new LockClient({ redis, keyPrefix, logger: quietLogger, pubsub, replicaSync: false });
    other = new LockClient({ redis: otherRedis, keyPrefix, logger: quietLogger });
  });
  afterAll(async () => {
    proxy.cutOff(false);
    await Promise.all([locks.close(), other.close()]);
    redis.disconnect();
    otherRedis.disconnect();
    await proxy.close();
  });

  it('the hand-over heard after the re-entry of the other wait leaves both holds held', async () => {
    const name = 'two-waits';
    const holder = await other.getFairLock(name, options).lock();
    const lock = locks.getFairLock(name, options);
    // The first wait (the queue's head) retries seldom, the second often: the second's retry comes
    // first once the lock is handed to the first.
    const seldom = locks.getFairLock(name, { ...options, staleWaiterTimeout: 30_000 });
    const handedTo = seldom.lock({ owner: 'job' });
    await eventually(async () => (await redis.llen(lock.keys.queue)) === 1);
    const reenters = lock.lock({ owner: 'job' });
    const waits = [handedTo, reenters];
    waits.forEach((wait) => wait.catch(() => undefined));
    await eventually(async () => (await redis.llen(lock.keys.queue)) === 2);
    const channel = `${keyPrefix}:{${name}}:unlock:${locks.clientId}`;
    await eventually(async () => (await redis.pubsub('NUMSUB', channel))[1] === 1);
    await sleep(300); // both parked, their retries refused
    proxy.cutOff(true); // the hand-over's message waits in the proxy
    let handles: LockHandle[] = [];
    try {
      expect(await holder.release()).toBe('released');
      // The wait not handed the lock re-enters on its next retry, while the other has not heard yet.
      const second = await reenters;
      expect(await redis.hget(lock.keys.lock, 'job')).toBe('2');
      proxy.cutOff(false);
      handles = await Promise.all(waits);
      expect(handles[1]).toBe(second);
      await sleep(100);
      expect(handles.map((handle) => handle.signal.aborted)).toEqual([false, false]);
      expect(await redis.hget(lock.keys.lock, 'job')).toBe('2');
    } finally {
      proxy.cutOff(false);
      for (const handle of handles) await handle.release();
    }
    expect(await redis.exists(lock.keys.lock)).toBe(0);
  }, 30_000);
});
