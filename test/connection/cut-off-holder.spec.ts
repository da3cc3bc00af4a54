import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient, type LockHandle } from '../../lib';
import { quietLogger, sleep } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * A holder cut off from Redis (a partition: its connection stays open, its renewals get no answer)
 * must stop before another client can be granted the lock: its signal aborts when the lease it last
 * saw confirmed must be taken for over, not when the renewal stuck in flight finally times out.
 */
describe('a watched holder cut off from Redis', () => {
  let proxy: ReplyDroppingProxy;
  let cutOffRedis: Redis;
  let directRedis: Redis;
  let holder: LockClient;
  let other: LockClient;
  const keyPrefix = `cut-${randomUUID().slice(0, 8)}`;
  const WATCHDOG_MS = 1_500; // renewed every 500 ms
  // Longer than the lease: the renewal sent after the cut is still in flight when the lease ends.
  const OPERATION_TIMEOUT = 3_000;
  // A wide margin, so that a timer running late on a loaded machine still fires before Redis's lease ends.
  const DRIFT_FACTOR = 0.2;

  beforeAll(async () => {
    const upstream = sharedTopology('single').masters[0];
    proxy = await ReplyDroppingProxy.start(upstream);
    cutOffRedis = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 1 });
    directRedis = new Redis({ ...upstream, maxRetriesPerRequest: 1 });
    const options = { keyPrefix, logger: quietLogger, watchdogTimeout: WATCHDOG_MS, driftFactor: DRIFT_FACTOR };
    holder = new LockClient({ redis: cutOffRedis, operationTimeout: OPERATION_TIMEOUT, ...options });
    other = new LockClient({ redis: directRedis, ...options });
    await cutOffRedis.ping();
  });
  afterAll(async () => {
    proxy.cutOff(false);
    await Promise.all([holder.close().catch(() => undefined), other.close()]);
    cutOffRedis.disconnect();
    directRedis.disconnect();
    await proxy.close();
  });

  const KINDS: [string, (locks: LockClient, name: string) => Promise<LockHandle | null>][] = [
    ['reentrant', (locks, name) => locks.getLock(name).tryLock()],
    ['fair', (locks, name) => locks.getFairLock(name).tryLock()],
    ['semaphore', (locks, name) => locks.getSemaphore(name, { permits: 1 }).tryAcquire()],
  ];

  it.each(KINDS)(
    '%s: its signal has aborted by the time another client is granted the lock',
    async (kind, take) => {
      const name = `cut-${kind}`;
      const held = await take(holder, name);
      expect(held).not.toBeNull();
      await sleep(700); // a renewal or two landed
      expect(held!.signal.aborted).toBe(false);
      proxy.cutOff(true);
      try {
        const cutAt = Date.now();
        let taken: LockHandle | null = null;
        while (!taken && Date.now() - cutAt < 10_000) {
          taken = await take(other, name);
          if (!taken) await sleep(10);
        }
        expect(taken).not.toBeNull();
        const abortedWhenTaken = held!.signal.aborted;
        await taken!.release();
        expect(abortedWhenTaken).toBe(true);
      } finally {
        proxy.cutOff(false);
      }
      await held!.release().catch(() => undefined);
    },
    30_000,
  );
});
