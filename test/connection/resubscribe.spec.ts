import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { createLockClient, runInLockScope, type LockClient } from '../../lib';
import { eventually, quietLogger, sleep } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * ioredis subscribes its connection's channels again by itself at every reconnect, and nothing
 * catches that call: if the connection drops again before the reply (a flapping network, a
 * failover), a subscriber whose queued commands fail on a lost connection rejects it, and an
 * unhandled rejection ends a Node process. The library's own subscriber connections must not.
 */
describe('a subscriber connection that drops again while ioredis re-subscribes', () => {
  const upstream = sharedTopology('single').masters[0];
  const name = `rs-${randomUUID().slice(0, 8)}`;
  let proxy: ReplyDroppingProxy;
  let admin: Redis;
  let locks: LockClient;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    proxy = await ReplyDroppingProxy.start(upstream);
    admin = new Redis(upstream);
    const connection = {
      type: 'single' as const,
      host: '127.0.0.1',
      port: proxy.port,
      redisOptions: { connectionName: name },
    };
    locks = await createLockClient({ connection, keyPrefix: name, logger: quietLogger });
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await locks.close();
    await proxy.close();
    await admin.quit();
  });

  /** The id of our subscriber's connection on the server (CLIENT LIST: our name, subscribed). */
  async function subscriberId(): Promise<string | undefined> {
    const list = (await admin.call('CLIENT', 'LIST')) as string;
    const line = list.split('\n').find((l) => l.includes(` name=${name} `) && / sub=[1-9]/.test(l));
    return line?.match(/^id=(\d+)/)?.[1];
  }

  /** The subscriber's connection once it is one not seen before (a re-subscribed new connection). */
  async function newSubscriber(seen: Set<string>): Promise<string> {
    let id: string | undefined;
    await eventually(async () => (id = await subscriberId()) !== undefined && !seen.has(id), 10_000);
    seen.add(id!);
    return id!;
  }

  it('leaves no unhandled rejection, and the waiter still hears the release', async () => {
    const held = await locks.getLock('flap').lock();
    const waiting = runInLockScope(() => locks.getLock('flap').lock({ waitTime: 60_000 }), { newScope: true });
    waiting.catch(() => undefined); // a failed assertion leaves it to afterAll's close
    const seen = new Set<string>();
    let id = await newSubscriber(seen);
    for (let round = 1; round <= 3; round++) {
      // The reply to the re-subscription after this kill is lost, with its connection.
      proxy.dropNextReply(/subscribe/);
      await admin.call('CLIENT', 'KILL', 'ID', id);
      await eventually(async () => proxy.dropped === round, 10_000);
      id = await newSubscriber(seen);
    }
    await sleep(500); // a rejection of the lost re-subscription would be reported by now
    await held.release();
    const next = await waiting;
    await next.release();
    expect(unhandled.map(String)).toEqual([]);
  }, 60_000);
});
