import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient, type LockLostError } from '../../lib';
import { quietLogger, sleep } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * An application's own ioredis client, at ioredis's defaults, sends a command again on the new
 * connection when the old one died before its reply came. A simple lock's release whose reply was
 * lost so runs twice; the second run finds the lock gone (or another's) and must still report the
 * first run's outcome: 'released', with no lost lock reported, and the lock of whoever took it since
 * left alone.
 */
describe("a simple lock's release re-sent by the application's ioredis client after its reply was lost", () => {
  let proxy: ReplyDroppingProxy;
  let redis: Redis;
  let locks: LockClient;
  let rival: LockClient;
  const lost: LockLostError[] = [];
  const keyPrefix = `rr-${randomUUID().slice(0, 8)}`;
  /** The 'released' reply alone, as Redis sends it: a bulk string (never a pub/sub message). */
  const RELEASED_REPLY = /^\$8\r\nreleased\r\n$/;

  beforeAll(async () => {
    const upstream = sharedTopology('single').masters[0];
    proxy = await ReplyDroppingProxy.start(upstream);
    redis = new Redis({ host: '127.0.0.1', port: proxy.port }); // ioredis defaults: re-sends
    locks = new LockClient({ redis, keyPrefix, logger: quietLogger });
    rival = new LockClient({ redis: new Redis(upstream), keyPrefix, logger: quietLogger });
    for (const client of [locks, rival]) client.on('lockLost', (error) => lost.push(error));
    await redis.ping();
  });
  beforeEach(() => (lost.length = 0));
  afterAll(async () => {
    await locks.close();
    await rival.close();
    redis.disconnect();
    rival.redis.disconnect();
    await proxy.close();
  });

  /** Runs `release` with the next 'released' reply lost, and checks that it was lost and sent again. */
  async function withReplyLost<T>(release: () => Promise<T>): Promise<T> {
    const dropped = proxy.dropped;
    proxy.dropNextReply(RELEASED_REPLY);
    const outcome = await release();
    expect(proxy.dropped).toBe(dropped + 1);
    return outcome;
  }

  it.each(['explicit', 'watchdog'] as const)(
    "handle.release(): 'released', no lost lock, the lock free (%s lease)",
    async (lease) => {
      const name = `handle-${lease}`;
      const lock =
        lease === 'explicit' ? locks.getSimpleLock(name) : locks.getSimpleLock(name, { leaseTime: 'watchdog' });
      const handle = await lock.lock();
      expect(await withReplyLost(() => handle.release())).toBe('released');
      expect(handle.signal.aborted).toBe(false);
      expect(await rival.getSimpleLock(name).isLocked()).toBe(false);
      await sleep(100); // a late lost-lock report would come by now
      expect(lost).toEqual([]);
    },
  );

  it('the repeat leaves alone the hold that a waiting client took in between', async () => {
    const name = 'taken-between';
    const handle = await locks.getSimpleLock(name).lock({ leaseTime: 30_000 });
    const waiting = rival.getSimpleLock(name).lock({ waitTime: 10_000, leaseTime: 30_000 });
    await sleep(200); // parked: the release wakes it, and it may take the lock before the repeat
    expect(await withReplyLost(() => handle.release())).toBe('released');
    const next = await waiting;
    await sleep(200);
    expect(await rival.redis.get(rival.getSimpleLock(name).keys.lock)).toBe(next.owner);
    expect(next.signal.aborted).toBe(false);
    expect(await next.release()).toBe('released');
    expect(lost).toEqual([]);
  });

  it("unlock({ owner }) of another client's hold: 'released', and the same owner's next hold is left alone", async () => {
    const name = 'by-owner';
    const owner = 'job:{7}';
    const first = await rival.getSimpleLock(name).lock({ owner, leaseTime: 30_000 });
    expect(await withReplyLost(() => locks.getSimpleLock(name).unlock({ owner }))).toBe('released');
    expect(await first.release()).toBe('expired'); // its holder learns that it was released under it
    const again = await rival.getSimpleLock(name).lock({ owner, leaseTime: 30_000, waitTime: 5_000 });
    await sleep(200);
    expect(await rival.redis.get(rival.getSimpleLock(name).keys.lock)).toBe(again.owner);
    expect(await again.release()).toBe('released');
  });
});
