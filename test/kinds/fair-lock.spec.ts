import Redis from 'ioredis';
import { engineOf, FAIR_LOCK_DEFAULTS, RedisPubSub, runInLockScope } from '../../lib/internal';
import { rememberGivenUpWait } from '../../lib/engine/waiting/given-up-waits';
import {
  eventually,
  lockClient,
  singlePort,
  sleep,
  testPrefix,
  watchCommands,
  type TestClient,
} from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { killAll, raceCounter, startWorker, type Worker } from '../support/workers';

describe('FairLock', () => {
  const prefix = testPrefix();
  const fairOptions = { staleWaiterTimeout: 1_500, acceptanceLease: 1_000 };
  let client: TestClient;
  const workers: Worker[] = [];
  let name: string;

  beforeAll(() => (client = lockClient({ keyPrefix: prefix })));
  beforeEach(() => (name = `fair-${Math.random().toString(36).slice(2)}`));
  afterEach(() => killAll(workers.splice(0)));
  afterAll(() => client.close());

  const queueLength = () => client.redis.llen(client.locks.getFairLock(name).keys.queue);
  const lockKeysLeft = async () => {
    const k = client.locks.getFairLock(name).keys;
    return client.redis.exists(k.lock, k.queue, k.deadlines);
  };
  const startQueueWorker = (extra: Record<string, string | number> = {}) => {
    const worker = startWorker('queue-waiters.ts', {
      REDIS_PORT: singlePort(),
      KEY_PREFIX: prefix,
      LOCK_NAME: name,
      ORDER_KEY: `${prefix}:order:${name}`,
      STALE_MS: fairOptions.staleWaiterTimeout,
      ACCEPT_MS: fairOptions.acceptanceLease,
      ...extra,
    });
    workers.push(worker);
    return worker;
  };

  /** The test holds the lock; a waiter that then dies queues first, a live one behind it. */
  const queueThenKillTheHead = async () => {
    const holder = await client.locks.getFairLock(name, fairOptions).lock();
    const doomed = startQueueWorker();
    const survivor = startQueueWorker();
    await Promise.all([doomed.waitFor('ready'), survivor.waitFor('ready')]);
    doomed.send('enqueue doomed');
    await eventually(async () => (await queueLength()) === 1);
    survivor.send('enqueue survivor');
    await eventually(async () => (await queueLength()) === 2);
    doomed.child.kill('SIGKILL');
    return { holder, survivor };
  };

  it('20 waiters in 4 processes acquire in exactly the order they queued; then every key is gone', async () => {
    const lock = client.locks.getFairLock(name, fairOptions);
    const holder = await lock.lock();
    const procs = Array.from({ length: 4 }, () => startQueueWorker());
    await Promise.all(procs.map((p) => p.waitFor('ready')));
    const expected: string[] = [];
    for (let i = 0; i < 20; i++) {
      procs[(i * 7) % 4].send(`enqueue ${i}`); // interleave processes
      expected.push(String(i));
      await eventually(async () => (await queueLength()) === i + 1, 10_000, 5);
    }
    await holder.release();
    procs.forEach((p) => p.send('finish'));
    await Promise.all(procs.map((p) => p.result));
    expect(await client.redis.lrange(`${prefix}:order:${name}`, 0, -1)).toEqual(expected);
    expect(await lockKeysLeft()).toBe(0);
  }, 60_000);

  it('a waiter killed while queued does not stall the ones behind it beyond staleWaiterTimeout + acceptanceLease', async () => {
    const { holder, survivor } = await queueThenKillTheHead();
    const releasedAt = Date.now();
    await holder.release(); // handed to the dead head, whose deadline has not run out yet
    await eventually(async () => (await client.redis.llen(`${prefix}:order:${name}`)) === 1, 15_000);
    const waited = Date.now() - releasedAt;
    expect(await client.redis.lrange(`${prefix}:order:${name}`, 0, -1)).toEqual(['survivor']);
    expect(waited).toBeLessThan(fairOptions.staleWaiterTimeout + fairOptions.acceptanceLease + 3_000);
    survivor.send('finish');
    await survivor.result;
    // Handed to the dead head (Redis had not yet seen its connections close), its entry left the queue;
    // passed by as nobody hears it (Redis had), it keeps its place for one acceptance lease, and its
    // queue keys expire with it: either way nothing is left once that is over.
    await eventually(
      async () => (await lockKeysLeft()) === 0,
      fairOptions.staleWaiterTimeout + fairOptions.acceptanceLease + 2_000,
    );
  }, 60_000);

  it('a process told of a hand-off that cannot take it (frozen) holds up the next waiter for the acceptance lease, not its whole deadline', async () => {
    // Default acceptance lease. Waiters re-check every third of staleWaiterTimeout (3 s here): the
    // one behind learns of the lapse then. The frozen waiter's own deadline (9 s) would end it later.
    const options = { staleWaiterTimeout: 9_000 };
    const lock = client.locks.getFairLock(name, options);
    const holder = await lock.lock();
    const frozen = startQueueWorker({ STALE_MS: options.staleWaiterTimeout, ACCEPT_MS: '' });
    const next = startQueueWorker({ STALE_MS: options.staleWaiterTimeout, ACCEPT_MS: '' });
    await Promise.all([frozen.waitFor('ready'), next.waitFor('ready')]);
    frozen.send('enqueue frozen');
    await eventually(async () => (await queueLength()) === 1);
    next.send('enqueue next');
    await eventually(async () => (await queueLength()) === 2);
    frozen.child.kill('SIGSTOP'); // its subscriber still counts for PUBLISH: the hand-off goes to it
    try {
      const releasedAt = Date.now();
      await holder.release();
      const order = () => client.redis.lrange(`${prefix}:order:${name}`, 0, -1);
      await eventually(async () => (await order()).includes('next'), 15_000);
      // 1 s lapse + up to 3 s until the re-check, with slack; the old 10 s default (or the 9 s deadline) fails it.
      expect(Date.now() - releasedAt).toBeLessThan(FAIR_LOCK_DEFAULTS.acceptanceLease + 3_000 + 3_000);
    } finally {
      frozen.child.kill('SIGCONT');
    }
    next.send('finish');
    await next.result;
  }, 60_000);

  it('a wait joins the queue only once it listens: a release while its subscription is unconfirmed goes to the wait queued after, which is first in the queue', async () => {
    const proxy = await ReplyDroppingProxy.start({ host: '127.0.0.1', port: singlePort() });
    const slow = lockClient({ port: proxy.port, keyPrefix: prefix });
    const quick = lockClient({ keyPrefix: prefix });
    try {
      await Promise.all([slow.redis.ping(), quick.redis.ping()]);
      const lock = client.locks.getFairLock(name, fairOptions);
      const holder = await lock.lock();
      let answered = 0;
      watchCommands(slow, (command, reply) => {
        if (/^eval/.test(command.name) && command.args[2] === lock.keys.lock) {
          void reply.then(
            () => answered++,
            (error: Error) => !/^NOSCRIPT/.test(error.message) && answered++, // sent again as EVAL
          );
        }
      });
      // Its subscription is confirmed 1.5 s late (its commands are not slowed).
      proxy.delaySubscriberReplies(1_500);
      const slowWait = slow.locks.getFairLock(name, fairOptions).lock({ waitTime: 20_000 });
      slowWait.catch(() => undefined);
      await eventually(() => answered >= 1, 5_000);
      // Refused, and not queued: it does not listen yet. (Queued, the release below would pass it by,
      // nobody hearing it, for the wait queued after it: an order the queue did not show.)
      expect(await queueLength()).toBe(0);
      const quickWait = quick.locks.getFairLock(name, fairOptions).lock({ waitTime: 20_000 });
      quickWait.catch(() => undefined);
      await eventually(async () => (await queueLength()) === 1);
      await holder.release();
      const first = await quickWait;
      // Once it listens, it queues (behind nobody now) and is handed the lock next.
      await eventually(async () => (await queueLength()) === 1, 10_000);
      proxy.delaySubscriberReplies(0);
      await first.release();
      const second = await slowWait;
      expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
      await second.release();
    } finally {
      await Promise.all([slow.close(), quick.close()]);
      await proxy.close();
    }
  }, 60_000);

  it('a dead waiter in the middle of the queue is pruned once its deadline passes', async () => {
    const { holder, survivor } = await queueThenKillTheHead();
    await sleep(fairOptions.staleWaiterTimeout + 500); // the dead one stopped refreshing its deadline
    const releasedAt = Date.now();
    await holder.release();
    await eventually(async () => (await client.redis.llen(`${prefix}:order:${name}`)) === 1, 10_000);
    expect(Date.now() - releasedAt).toBeLessThan(2_000); // no acceptance lease wasted on the dead waiter
    survivor.send('finish');
    await survivor.result;
  }, 60_000);

  it('the lock is never handed to a waiter that cannot take it: one nobody listens for, or one its process no longer has', async () => {
    const options = { staleWaiterTimeout: 60_000, acceptanceLease: 20_000 }; // a stalled hand-off would show
    const waiterClient = lockClient({ keyPrefix: prefix });
    try {
      const lock = client.locks.getFairLock(name, options);
      const holder = await lock.lock();
      // Ahead of the real waiter: a wait of a process that is gone (nobody on its channel), and one of the
      // waiter's own process that gave up without leaving the queue (its abandon never landed), of the
      // very owner the real waiter waits for: a wait of its own, whose hand-off is not the real one's.
      const owner = 'order:1';
      const [seconds] = await client.redis.time();
      const deadline = (Number(seconds) + 600) * 1000;
      const gaveUp = `${waiterClient.locks.clientId}:gave-up`;
      const ghosts = ['order:2\0gone-process:w1', `${owner}\0${gaveUp}`];
      for (const ghost of ghosts) {
        await client.redis.rpush(lock.keys.queue, ghost);
        await client.redis.zadd(lock.keys.deadlines, deadline, ghost);
      }
      // The waiter's client ran that wait and gave it up (only such a wait's hand-off is passed on: a client
      // sharing its client id may be waiting under an id it does not know).
      rememberGivenUpWait(engineOf(waiterClient.locks), gaveUp);
      const waiting = waiterClient.locks.getFairLock(name, options).lock({ owner, waitTime: 30_000 });
      await eventually(async () => (await queueLength()) === 3, 10_000);
      const releasedAt = Date.now();
      await holder.release();
      const next = await waiting;
      expect(Date.now() - releasedAt).toBeLessThan(5_000); // not the 20 s acceptance lease of a ghost
      // The given-up wait is out; the one nobody heard keeps its place, for one acceptance lease at most
      // (its process might have been reconnecting), and the queue's keys expire by then.
      expect(await client.redis.lrange(lock.keys.queue, 0, -1)).toEqual([ghosts[0]]);
      const [now] = await client.redis.time();
      const kept = Number(await client.redis.zscore(lock.keys.deadlines, ghosts[0]));
      expect(kept).toBeLessThanOrEqual((Number(now) + 1) * 1000 + options.acceptanceLease);
      await next.release();
      for (const key of [lock.keys.queue, lock.keys.deadlines]) {
        const ttl = await client.redis.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(options.staleWaiterTimeout);
      }
    } finally {
      await waiterClient.close();
    }
  }, 60_000);

  it('a waiter nobody hears at a hand-over (its subscriber reconnecting) keeps its place: it is next once it hears again', async () => {
    const options = { staleWaiterTimeout: 10_000, acceptanceLease: 2_000 };
    // B's own subscriber, which reconnects 500 ms after it is cut: long enough for a hand-over to miss it.
    const subscriber = new Redis({ port: singlePort(), retryStrategy: () => 500 });
    const subscriberId = String(await subscriber.client('ID')); // asked before it subscribes
    const b = lockClient({ keyPrefix: prefix, pubsub: new RedisPubSub(subscriber, false, true) });
    const [c, d] = [lockClient({ keyPrefix: prefix }), lockClient({ keyPrefix: prefix })];
    const order: string[] = [];
    try {
      const holder = await client.locks.getFairLock(name, options).lock();
      const wait = (who: string, waiter: TestClient) =>
        waiter.locks
          .getFairLock(name, options)
          .lock({ waitTime: 30_000 })
          .then((handle) => (order.push(who), handle));
      const waits: Record<string, Promise<{ release(): Promise<unknown> }>> = {};
      for (const [who, waiter] of [
        ['B', b],
        ['C', c],
        ['D', d],
      ] as const) {
        waits[who] = wait(who, waiter);
        await eventually(async () => (await queueLength()) === Object.keys(waits).length);
      }
      const entryOfB = async () =>
        (await client.redis.lrange(client.locks.getFairLock(name).keys.queue, 0, -1)).find((e) =>
          e.includes(`\0${b.locks.clientId}:`),
        )!;
      const queuedB = await entryOfB();
      await client.redis.client('KILL', 'ID', subscriberId);
      await holder.release();
      const handedToC = await waits.C;
      expect(order).toEqual(['C']);
      expect(await entryOfB()).toBe(queuedB); // passed by, still first in line

      // Its subscriber back (resubscribed), B's wait tries again: refused (C holds), it keeps its place
      // and refreshes it.
      const { deadlines, channel } = client.locks.getFairLock(name).keys;
      await eventually(async () => {
        const [, listening] = (await client.redis.call('PUBSUB', 'NUMSUB', `${channel}:${b.locks.clientId}`)) as [
          string,
          number,
        ];
        const [now] = await client.redis.time();
        const deadline = Number(await client.redis.zscore(deadlines, queuedB));
        return listening > 0 && deadline > Number(now) * 1000 + options.acceptanceLease;
      }, 10_000);
      await handedToC.release();
      await (await waits.B).release();
      await (await waits.D).release();
      expect(order).toEqual(['C', 'B', 'D']);
    } finally {
      await Promise.all([b.close(), c.close(), d.close()]);
      subscriber.disconnect();
    }
  }, 60_000);

  it('a queue whose holder and waiters all died expires with their deadlines: no key of it is left for good', async () => {
    // The holder's lease runs out and its waiters' processes are killed: nobody takes the lock again to
    // sweep the queue, which must still go.
    const doomed = [startQueueWorker(), startQueueWorker()];
    await Promise.all(doomed.map((w) => w.waitFor('ready')));
    await client.locks.getFairLock(name, fairOptions).lock({ leaseTime: 2_000 });
    doomed.forEach((w, i) => w.send(`enqueue doomed-${i}`));
    await eventually(async () => (await queueLength()) === 2);
    for (const w of doomed) w.child.kill('SIGKILL');
    const k = client.locks.getFairLock(name).keys;
    for (const key of [k.queue, k.deadlines]) expect(await client.redis.pttl(key)).toBeGreaterThan(0);
    await eventually(
      async () => (await client.redis.exists(k.lock, k.queue, k.deadlines, k.waiterHolds)) === 0,
      10_000,
    );
  }, 30_000);

  it('a tryLock that times out leaves no trace in the queue', async () => {
    const lock = client.locks.getFairLock(name, fairOptions);
    const holder = await lock.lock();
    const other = await runInLockScope(() => lock.tryLock({ waitTime: 300 }), { newScope: true });
    expect(other).toBeNull();
    expect(await queueLength()).toBe(0);
    expect(await client.redis.exists(lock.keys.deadlines)).toBe(0);
    await holder.release();
    expect(await lockKeysLeft()).toBe(0);
  });

  it('re-enters like the reentrant lock and hands over only on the last release', async () => {
    const lock = client.locks.getFairLock(name, fairOptions);
    await runInLockScope(async () => {
      const outer = await lock.lock();
      const inner = await lock.lock();
      expect(inner.fencingToken).toBe(outer.fencingToken);
      expect(await lock.getHoldCount()).toBe(2);
      const waiting = runInLockScope(() => lock.lock({ leaseTime: 5_000 }), { newScope: true });
      await eventually(async () => (await queueLength()) === 1);
      expect(await inner.release()).toBe('decremented');
      await sleep(100);
      expect(await queueLength()).toBe(1);
      expect(await outer.release()).toBe('released');
      const next = await waiting;
      expect(next.fencingToken).toBeGreaterThan(outer.fencingToken);
      await next.release();
    });
    expect(await lockKeysLeft()).toBe(0);
  });

  it('a handed-over lock carries the newest fencing token and, once accepted, the full lease', async () => {
    const lock = client.locks.getFairLock(name, fairOptions);
    const holder = await lock.lock();
    const waiting = runInLockScope(() => lock.lock(), { newScope: true }); // watchdog lease
    await eventually(async () => (await queueLength()) === 1);
    await holder.release();
    const next = await waiting;
    expect(next.fencingToken).toBe(Number(await client.redis.get(lock.keys.fence)));
    expect(next.fencingToken).toBeGreaterThan(holder.fencingToken);
    await eventually(async () => (await client.redis.pttl(lock.keys.lock)) > fairOptions.acceptanceLease);
    expect(await client.redis.hget(lock.keys.lock, next.owner)).toBe('1');
    expect(next.signal.aborted).toBe(false);
    await next.release();
    expect(await lockKeysLeft()).toBe(0);
  });

  // The hand-over is accepted by a command (replica counts not read yet, a late message) or told in the
  // message, on the acceptance lease until the holder's renewal at half of it (fair-grant-in-message.spec:
  // a freeze before that loses the lock). Either way, once Redis has the full lease the holder keeps it.
  it('a handed-over hold, once taken over (accepted, or renewed at half its acceptance lease), survives a section that blocks the event loop past the acceptance lease, and can re-enter', async () => {
    const lock = client.locks.getFairLock(name, fairOptions);
    const holder = await lock.lock();
    await runInLockScope(
      async () => {
        const waiting = lock.lock();
        await eventually(async () => (await queueLength()) === 1);
        await holder.release();
        const first = await waiting;
        await eventually(async () => (await client.redis.pttl(lock.keys.lock)) > fairOptions.acceptanceLease);
        const blockUntil = Date.now() + fairOptions.acceptanceLease + 500;
        while (Date.now() < blockUntil); // synchronous work: no timer of ours can run meanwhile
        expect(await client.redis.hget(lock.keys.lock, first.owner)).toBe('1');
        expect(await client.redis.pttl(lock.keys.lock)).toBeGreaterThan(fairOptions.acceptanceLease);
        const second = await lock.lock();
        expect(await client.redis.hget(lock.keys.lock, first.owner)).toBe('2');
        expect(second.fencingToken).toBe(first.fencingToken);
        expect(await second.release()).toBe('decremented');
        expect(await first.release()).toBe('released');
        expect(first.signal.aborted).toBe(false);
      },
      { newScope: true },
    );
    expect(await lockKeysLeft()).toBe(0);
  });

  it('a hand-off message Redis does not back (stale or forged) is refused before the caller runs; the waiter keeps its turn', async () => {
    const lock = client.locks.getFairLock(name, fairOptions);
    const holder = await lock.lock();
    const owner = 'late-waiter:1';
    let granted = false;
    const waiting = lock.lock({ owner }).then((h) => ((granted = true), h));
    const channel = `${lock.keys.channel}:${client.locks.clientId}`;
    await eventually(async () => (await client.redis.pubsub('NUMSUB', channel))[1] === 1);
    await eventually(async () => (await client.locks.inspect(name)).queue.length === 1);
    const [{ waiterId }] = (await client.locks.inspect(name)).queue;
    // As if the lock had been handed to this waiter and the hand-off had been lost since (a failover).
    await client.redis.publish(channel, `${waiterId}|999999`);
    await sleep(300);
    expect(granted).toBe(false);
    expect((await client.locks.inspect(name)).holders).toEqual([{ owner: holder.owner, holdCount: 1 }]);
    await holder.release();
    const next = await waiting;
    expect(next.fencingToken).toBeGreaterThan(holder.fencingToken);
    expect(next.fencingToken).not.toBe(999999);
    await next.release();
    expect(await lockKeysLeft()).toBe(0);
  });

  it('excludes the reentrant lock of the same name', async () => {
    const fair = await client.locks.getFairLock(name).lock({ leaseTime: 5_000 });
    expect(await client.locks.getLock(name).tryLock()).toBeNull();
    await fair.release();
    const plain = await client.locks.getLock(name).lock({ leaseTime: 5_000 });
    expect(await runInLockScope(() => client.locks.getFairLock(name).tryLock(), { newScope: true })).toBeNull();
    await plain.release();
  });

  it('8 processes incrementing a racy counter lose no update', async () => {
    const env = {
      REDIS_PORT: singlePort(),
      KEY_PREFIX: prefix,
      LOCK_KIND: 'fair',
      LOCK_NAME: name,
      COUNTER_KEY: `${prefix}:counter:${name}`,
      TOKENS_KEY: `${prefix}:tokens:${name}`,
      DURATION_MS: 3_000,
    };
    const { increments, total } = await raceCounter(8, env, workers);
    expect(increments.every((n) => n > 0)).toBe(true);
    expect(Number(await client.redis.get(env.COUNTER_KEY))).toBe(total);
    const tokens = (await client.redis.lrange(env.TOKENS_KEY, 0, -1)).map(Number);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
    expect(await lockKeysLeft()).toBe(0);
  }, 60_000);
});
