import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient, runInLockScope, type LockLostError } from '../../lib';
import { quietLogger, sleep } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * The holder's belief follows Redis (issue 39): what the local record of a hold says about its lease
 * is what Redis now has, so a signal aborts only when the lock is actually gone.
 */
describe("the holder's belief follows Redis", () => {
  let redis: Redis;
  let locks: LockClient;
  const lost: LockLostError[] = [];

  beforeAll(() => {
    redis = new Redis(sharedTopology('single').masters[0]);
    locks = new LockClient({ redis, keyPrefix: `belief-${randomUUID().slice(0, 8)}`, logger: quietLogger });
    locks.on('lockLost', (error) => lost.push(error));
  });
  afterAll(async () => {
    await locks.close();
    redis.disconnect();
  });

  it.each(['reentrant', 'fair', 'write'] as const)(
    '%s: a re-entry with a longer explicit lease moves the local expiry with the lease Redis now has (no false loss)',
    async (kind) => {
      const name = `longer-${kind}`;
      const lock =
        kind === 'reentrant'
          ? locks.getLock(name)
          : kind === 'fair'
            ? locks.getFairLock(name)
            : locks.getReadWriteLock(name).writeLock();
      lost.length = 0;
      await runInLockScope(async () => {
        const outer = await lock.lock({ leaseTime: 1_000 });
        const inner = await lock.lock({ leaseTime: 5_000 });
        await sleep(1_600); // past the first lease: Redis still holds it for the second
        expect(await lock.remainTimeToLive()).toBeGreaterThan(1_000);
        expect([outer.signal.aborted, inner.signal.aborted]).toEqual([false, false]);
        expect(lost).toEqual([]);
        expect(await inner.release()).toBe('decremented');
        expect(await outer.release()).toBe('released');
      });
      expect(await lock.isLocked()).toBe(false);
    },
  );
});
