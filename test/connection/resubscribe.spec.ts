import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { createLockClient, LockClient, runInLockScope } from '../../lib';
import { eventually, quietLogger, sleep, testPrefix } from '../support/engine';
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

/**
 * The other way ioredis's own re-subscription goes unhandled: the client is closed while its
 * subscriber reconnects, between the ready check (INFO) going out and its answer. The answer makes
 * the connection ready, ioredis re-subscribes at once on a socket that is closing, and the close
 * rejects that call. Seen as a fault-suite racer that ended with "Connection is closed." at its close.
 */
describe('a client closed while its subscriber connection is being made ready again', () => {
  const upstream = sharedTopology('single').masters[0];
  let admin: Redis;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);

  beforeAll(() => {
    process.on('unhandledRejection', onUnhandled);
    admin = new Redis(upstream);
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await admin.quit();
  });

  /** The library's subscriber connection of `locks` (not reachable through the public API). */
  const subscriberOf = (locks: LockClient): Redis =>
    (locks as unknown as { pubsub: { connection: Redis } }).pubsub.connection;

  const cases: [string, () => Promise<LockClient>][] = [
    [
      'a LockClient given a connection',
      async () => {
        const redis = new Redis({ ...upstream, maxRetriesPerRequest: 0 });
        return new LockClient({ redis, keyPrefix: testPrefix(), onClose: async () => void (await redis.quit()) });
      },
    ],
    [
      'a client of createLockClient (a deployment)',
      () =>
        createLockClient({ connection: { type: 'single', ...upstream }, keyPrefix: testPrefix(), logger: quietLogger }),
    ],
  ];

  it.each(cases)(
    '%s: no unhandled rejection',
    async (_, make) => {
      const locks = await make();
      // A lock waited for leaves its channel subscribed for a while after.
      const held = await locks.getLock('close-mid-ready').lock();
      const waiting = runInLockScope(() => locks.getLock('close-mid-ready').lock({ waitTime: 10_000 }), {
        newScope: true,
      });
      await sleep(100);
      await held.release();
      await (await waiting).release();

      const subscriber = subscriberOf(locks);
      const list = (await admin.call('CLIENT', 'LIST')) as string;
      const line = list.split('\n').find((l) => l.includes(` addr=127.0.0.1:${subscriber.stream.localPort} `));
      expect(line).toMatch(/ sub=[1-9]/);
      // Closed right after the reconnected subscriber sent its ready check, before the answer comes.
      let closing: Promise<void> | undefined;
      const send = subscriber.sendCommand;
      subscriber.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
        const sent = send.apply(this, args);
        if (!closing && args[0].name === 'info' && subscriber.status === 'connect') closing = locks.close();
        return sent;
      } as Redis['sendCommand'];
      await admin.call('CLIENT', 'KILL', 'ID', line!.match(/^id=(\d+)/)![1]);
      await eventually(() => closing !== undefined, 10_000);
      await closing;
      await sleep(300); // a rejection of the re-subscription would be reported by now
      expect(unhandled.map(String)).toEqual([]);
    },
    30_000,
  );
});
