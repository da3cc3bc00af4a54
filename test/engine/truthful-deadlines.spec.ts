import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockAcquireTimeoutError, LockClient, LockOptionsError, type LockLostError } from '../../lib';
import { quietLogger } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/**
 * Every local deadline is measured on a monotonic clock and ends a drift margin before Redis's
 * (issue 40): a wall-clock step moves no wait or lease, and a holder cut off from Redis stops
 * believing before another client can be granted the lock.
 */
describe('deadlines the holder can trust', () => {
  let redis: Redis;
  const clients: LockClient[] = [];
  const client = (options: { driftFactor?: number } = {}) => {
    const locks = new LockClient({
      redis,
      keyPrefix: `deadlines-${randomUUID().slice(0, 8)}`,
      logger: quietLogger,
      ...options,
    });
    clients.push(locks);
    return locks;
  };

  beforeAll(() => (redis = new Redis(sharedTopology('single').masters[0])));
  afterEach(() => jest.restoreAllMocks());
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    redis.disconnect();
  });

  it('an explicit lease: the signal aborts a drift margin before Redis lets the lock go, while Redis still holds it', async () => {
    const locks = client({ driftFactor: 0.1 }); // 10 % + 2 ms: 202 ms of a 2 s lease
    const lock = locks.getLock('cut-off');
    const sentAt = Date.now();
    const handle = await lock.lock({ leaseTime: 2_000 });
    const abortedAfter = await new Promise<number>((resolve) =>
      handle.signal.addEventListener('abort', () => resolve(Date.now() - sentAt)),
    );
    const pttl = await redis.pttl(lock.keys.lock);
    expect((handle.signal.reason as LockLostError).reason).toBe('lease-expired');
    expect(abortedAfter).toBeLessThan(1_900);
    expect(pttl).toBeGreaterThan(0); // nobody else could have been granted it yet
    await handle.release();
  });

  it('a backward wall-clock step does not lengthen a wait: waitTime is measured on a monotonic clock', async () => {
    const locks = client();
    const holder = await locks.getLock('stepped').lock({ leaseTime: 20_000 });
    const realNow = Date.now.bind(Date);
    const started = realNow();
    jest.spyOn(Date, 'now').mockImplementation(() => realNow() - 10_000 * Math.min(1, (realNow() - started) / 100));
    const error = await locks
      .getLock('stepped')
      .lock({ waitTime: 1_000, owner: 'other' })
      .catch((e: unknown) => e);
    const waited = realNow() - started;
    expect(error).toBeInstanceOf(LockAcquireTimeoutError);
    expect(waited).toBeLessThan(4_000); // 10 s more with a wall-clock deadline
    jest.restoreAllMocks();
    await holder.release();
  });

  it('a forward wall-clock step does not end a lease early', async () => {
    const locks = client();
    const handle = await locks.getLock('jumped').lock({ leaseTime: 3_000 });
    const realNow = Date.now.bind(Date);
    jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 60_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(handle.signal.aborted).toBe(false);
    jest.restoreAllMocks();
    expect(await handle.release()).toBe('released');
  });

  it('driftFactor outside [0, 1) is refused before anything is sent', () => {
    for (const driftFactor of [-0.1, 1, Number.NaN]) {
      expect(() => client({ driftFactor })).toThrow(LockOptionsError);
    }
  });
});
