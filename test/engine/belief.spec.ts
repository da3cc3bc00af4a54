import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockAcquireTimeoutError, LockClient, LockLostError, MultiLock, runInLockScope } from '../../lib';
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

  /** The lock `name` of `kind`: the write side for a read-write lock. */
  const lockOfKind = (kind: 'reentrant' | 'fair' | 'write' | 'read-after-write', name: string) =>
    kind === 'reentrant'
      ? locks.getLock(name)
      : kind === 'fair'
        ? locks.getFairLock(name)
        : locks.getReadWriteLock(name).writeLock();

  it.each(['reentrant', 'fair', 'write'] as const)(
    '%s: a re-entry with a longer explicit lease moves the local expiry with the lease Redis now has (no false loss)',
    async (kind) => {
      const name = `longer-${kind}`;
      const lock = lockOfKind(kind, name);
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

  describe('re-entry only from inside the critical section', () => {
    /** Runs `body` twice at once and says how many ran at the same moment at most. */
    async function overlapOf(run: (body: () => Promise<void>) => Promise<unknown>[]): Promise<number> {
      let active = 0;
      let most = 0;
      const body = async () => {
        most = Math.max(most, ++active);
        await sleep(150);
        active--;
      };
      await Promise.all(run(body));
      return most;
    }

    it.each(['reentrant', 'fair', 'write', 'read-after-write'] as const)(
      '%s: sibling branches of one scope (Promise.all) exclude each other; a call from inside re-enters',
      async (kind) => {
        const name = `siblings-${kind}`;
        const lock = lockOfKind(kind, name);
        const most = await runInLockScope(() =>
          overlapOf((body) => [
            lock.withLock(async () => {
              // From inside: re-enters at once (waitTime 0 would fail if it waited for anyone).
              const inner =
                kind === 'read-after-write' ? locks.getReadWriteLock(name).readLock() : (lock as typeof lock);
              await inner.withLock(() => body(), { waitTime: 0 });
            }),
            lock.withLock(() => body()),
          ]),
        );
        expect(most).toBe(1);
        expect(await lock.isLocked()).toBe(false);
      },
    );

    it('a MultiLock: siblings exclude each other; inside, a member re-enters', async () => {
      const multi = () => new MultiLock([locks.getLock('multi-a'), locks.getLock('multi-b')]);
      const most = await runInLockScope(() =>
        overlapOf((body) => [
          multi().withLock(() => locks.getLock('multi-b').withLock(() => body(), { waitTime: 0 })),
          multi().withLock(() => body()),
        ]),
      );
      expect(most).toBe(1);
    });

    it('another lock taken inside a holder re-enters the outer one from inside it (A, then B, then A again)', async () => {
      // As a Redisson thread that holds A, takes B and asks for A again re-enters A. B's section used to
      // get a scope of its own with no tie to A's, and the inner A waited for its own holder.
      const [outer, other] = [locks.getLock('nest-a'), locks.getLock('nest-b')];
      const result = await outer.withLock(() =>
        other.withLock(() => outer.withLock(() => 'inner A re-entered', { waitTime: 0 }), { waitTime: 1_000 }),
      );
      expect(result).toBe('inner A re-entered');
      expect(await outer.isLocked()).toBe(false);
      expect(await other.isLocked()).toBe(false);
    });

    it('a MultiLock taken inside a holder of A is nested in its section: A asked for again inside it re-enters', async () => {
      // The MultiLock holds neither of A's locks: its section used to get a scope with no tie to A's, and
      // the inner A waited for its own holder.
      const outer = locks.getLock('nest-multi-a');
      const group = new MultiLock([locks.getLock('nest-multi-b'), locks.getLock('nest-multi-c')]);
      const result = await outer.withLock(() =>
        group.withLock(() => outer.withLock(() => 'inner A re-entered', { waitTime: 0 }), { waitTime: 1_000 }),
      );
      expect(result).toBe('inner A re-entered');
      expect(await outer.isLocked()).toBe(false);
      expect(await locks.getLock('nest-multi-b').isLocked()).toBe(false);
    });

    it('inside a holder of A, sibling MultiLock sections still exclude each other on their own locks', async () => {
      const outer = locks.getLock('nest-multi-sib-a');
      const group = () => new MultiLock([locks.getLock('nest-multi-sib-b'), locks.getLock('nest-multi-sib-c')]);
      const most = await outer.withLock(() =>
        overlapOf((body) => [group().withLock(() => body()), group().withLock(() => body())]),
      );
      expect(most).toBe(1);
    });

    it('inside a holder of A, sibling branches still exclude each other on B', async () => {
      const [outer, other] = [locks.getLock('nest-sib-a'), locks.getLock('nest-sib-b')];
      const most = await outer.withLock(() =>
        overlapOf((body) => [
          other.withLock(() => outer.withLock(() => body(), { waitTime: 0 })),
          other.withLock(() => body()),
        ]),
      );
      expect(most).toBe(1);
      expect(await other.isLocked()).toBe(false);
    });

    it('newScope: true makes a call from inside wait for its own holder', async () => {
      const lock = locks.getLock('inside-new-scope');
      await lock.withLock(async () => {
        const error = await lock.withLock(() => 'ran', { newScope: true, waitTime: 100 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockAcquireTimeoutError);
      });
    });
  });

  it('close() with a hold still held aborts its signal with LockLostError (closed) before releasing it, and logs it', async () => {
    const own = new LockClient({ redis, keyPrefix: `belief-close-${randomUUID().slice(0, 8)}`, logger: quietLogger });
    const warned: string[] = [];
    const lock = own.getLock('closing');
    const handle = await lock.lock();
    let lockedAtAbort: number | undefined;
    const aborted = new Promise<unknown>((resolve) =>
      handle.signal.addEventListener('abort', () => {
        // Still in Redis when the holder hears of it: it is told before the lock goes.
        void redis.exists(lock.keys.lock).then((n) => ((lockedAtAbort = n), resolve(handle.signal.reason)));
      }),
    );
    own.on('lockLost', (error) => warned.push(error.message));
    await own.close();
    expect(handle.signal.aborted).toBe(true);
    const reason = await aborted;
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('closed');
    expect(lockedAtAbort).toBe(1);
    expect(warned).toEqual([expect.stringContaining('its client is closing')]);
    expect(await redis.exists(lock.keys.lock)).toBe(0);
  });
});
