import { engineOf, RedisPubSub, runInLockScope } from '../../lib/internal';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { SUBSCRIPTION_LINGER_MS } from '../../lib/engine/waiting/waiters';
import type { WaitTicket } from '../../lib/engine/waiting/wait-ticket';

describe('waiting on pub/sub', () => {
  let holder: TestClient;
  let waiter: TestClient;
  const prefix = testPrefix();

  beforeAll(() => {
    holder = lockClient({ keyPrefix: prefix });
    waiter = lockClient({ keyPrefix: prefix, connectionName: `${prefix}-waiter` });
  });
  afterAll(async () => {
    await holder.close();
    await waiter.close();
  });

  it('a waiter whose TTL-bound retry is a minute away acquires within moments of the release', async () => {
    const handle = await holder.locks.getLock('handoff').lock({ leaseTime: 60_000 });
    let acquiredAt = 0;
    const waiting = waiter.locks
      .getLock('handoff')
      .lock({ leaseTime: 5_000 })
      .then((h) => {
        acquiredAt = Date.now();
        return h;
      });
    await sleep(200);
    const releasedAt = Date.now();
    await handle.release();
    const next = await waiting;
    expect(acquiredAt - releasedAt).toBeLessThan(1_000); // the TTL retry would be ~60 s away
    await next.release();
  });

  it('one unlock message wakes one local waiter, not all of them', async () => {
    const lock = waiter.locks.getLock('herd');
    const key = lock.keys.lock;
    const first = await holder.locks.getLock('herd').lock({ leaseTime: 60_000 });
    const attempts = countScriptCalls(waiter, key);
    const order: number[] = [];
    const waiters = Array.from({ length: 10 }, (_, i) =>
      runInLockScope(() =>
        lock.withLock(async () => {
          order.push(i);
          await sleep(10);
        }),
      ),
    );
    await eventually(() => attempts.count() >= 20, 5_000); // two attempts each: before and after subscribing
    await sleep(100);
    const parkedAttempts = attempts.count();
    await first.release();
    await Promise.all(waiters);
    const wakeAttempts = attempts.count() - parkedAttempts;
    attempts.stop();
    expect(order).toHaveLength(10);
    // Ten hand-offs; a thundering herd would cost 10 + 9 + … + 1 = 55 attempts.
    expect(wakeAttempts).toBeLessThanOrEqual(13);
    await eventually(() => engineOf(waiter.locks).waiters.channelCount === 0, 5_000); // unsubscribed after the linger
    await eventually(async () => (await numsub(waiter, processChannel(waiter, lock))) === 0, 5_000);
  });

  it.each(['reentrant', 'simple'] as const)(
    '%s lock: waiters of one process whose lock runs out unreleased retry one at a time, not each at its own TTL',
    async (kind) => {
      const name = `expiry-${kind}`;
      const lockOn = (client: TestClient) =>
        kind === 'simple' ? client.locks.getSimpleLock(name, { leaseTime: 'watchdog' }) : client.locks.getLock(name);
      const lock = lockOn(waiter);
      await lockOn(holder).lock({ leaseTime: 1_500 }); // never released: its holder "crashed"
      const attempts = countScriptCalls(waiter, lock.keys.lock);
      const order: number[] = [];
      const waiters = Array.from({ length: 10 }, (_, i) =>
        runInLockScope(() =>
          lock.withLock(
            async () => {
              order.push(i);
              await sleep(5);
            },
            { leaseTime: 10_000 },
          ),
        ),
      );
      await eventually(() => attempts.count() >= 20, 5_000); // two attempts each: before and after subscribing
      const parkedAttempts = attempts.count();
      await Promise.all(waiters);
      const afterExpiry = attempts.count() - parkedAttempts;
      attempts.stop();
      expect(order).toHaveLength(10);
      // One retry when the lease runs out, then one attempt per hand-off (nine); each waiter retrying
      // at its own TTL would add nine refused attempts to that.
      expect(afterExpiry).toBeLessThanOrEqual(12);
    },
  );

  it('after the subscriber reconnects every waiter retries (a release during the outage is not lost)', async () => {
    const lock = waiter.locks.getLock('reconnect');
    await holder.locks.getLock('reconnect').lock({ leaseTime: 60_000 });
    const waiting = lock.lock({ leaseTime: 5_000 });
    await eventually(async () => (await numsub(holder, processChannel(waiter, lock))) === 1, 5_000);
    // Delete the lock without a message, as if the release was published while we were away …
    await holder.redis.del(lock.keys.lock);
    // … and drop the subscriber's connection: ioredis reconnects and resubscribes.
    const subscriberIds = await subscriberIdsNamed(holder, `${prefix}-waiter`);
    expect(subscriberIds).toHaveLength(1);
    const started = Date.now();
    await holder.redis.client('KILL', 'ID', subscriberIds[0]);
    const handle = await waiting;
    expect(Date.now() - started).toBeLessThan(10_000); // not the 60 s TTL
    await handle.release();
  });

  /**
   * Two waiters parked on `channel` of the waiter client, the first of them woken; then `leave` runs for the
   * first: whether the second is woken within `withinMs`.
   */
  async function secondWokenAfter(channel: string, leave: (first: WaitTicket) => void, withinMs: number) {
    const { waiters } = engineOf(waiter.locks);
    const first = waiters.join(channel);
    const second = waiters.join(channel);
    await Promise.all([first.subscribed, second.subscribed]);
    const firstWoken = first.ticket.wait(60_000);
    const secondWoken = second.ticket.wait(60_000);
    expect(waiters.wakeParked(channel)).toBe(true); // the longest parked: the first
    expect(await firstWoken).toBe('notified');
    leave(first.ticket);
    const outcome = await Promise.race([secondWoken, sleep(withinMs).then(() => 'still parked')]);
    second.ticket.leave();
    return outcome;
  }

  it('a waiter woken and gone before it tried hands its wake-up to the next parked waiter', async () => {
    // Aborted, say, before its attempt: the wake-up was never acted on.
    const outcome = await secondWokenAfter(`${prefix}:unused-wake`, (first) => first.leave(), 2_000);
    expect(outcome).toBe('notified');
  });

  it('a waiter woken that tried before it left keeps its wake-up to itself', async () => {
    const tried = (first: WaitTicket) => {
      first.takePayload(); // its attempt was made (and granted, say)
      first.leave();
    };
    expect(await secondWokenAfter(`${prefix}:used-wake`, tried, 300)).toBe('still parked');
  });
});

function countScriptCalls(client: TestClient, key: string): { count(): number; stop(): void } {
  const spy = jest.spyOn(client.redis, 'sendCommand');
  const isAttempt = (command: unknown) => {
    const c = command as { name: string; args: unknown[] };
    return (c.name === 'evalsha' || c.name === 'eval') && c.args[2] === key && String(c.args[3]).endsWith(':fence');
  };
  return {
    count: () => spy.mock.calls.filter(([command]) => isAttempt(command)).length,
    stop: () => spy.mockRestore(),
  };
}

/** Each waiting process listens on its own channel per lock. */
function processChannel(client: TestClient, lock: { keys: { channel: string } }): string {
  return `${lock.keys.channel}:${client.locks.clientId}`;
}

async function numsub(client: TestClient, channel: string): Promise<number> {
  const [, count] = (await client.redis.pubsub('NUMSUB', channel)) as [string, number];
  return Number(count);
}

/** The waiter's subscriber is a duplicate of its connection, so it carries the same client name. */
async function subscriberIdsNamed(client: TestClient, name: string): Promise<string[]> {
  const list = (await client.redis.client('LIST', 'TYPE', 'PUBSUB')) as string;
  return list
    .split('\n')
    .filter((line) => line.includes(` name=${name} `) && /sub=[1-9]/.test(line))
    .map((line) => /id=(\d+)/.exec(line)![1]);
}

describe('subscription linger', () => {
  /** A holder client and a waiter client on one prefix; `waitOnce` makes the waiter wait for 'hot' once. */
  async function withHotKey(
    test: (clients: { holder: TestClient; waiter: TestClient; waitOnce: () => Promise<void> }) => Promise<void>,
  ): Promise<void> {
    const prefix = testPrefix();
    const holder = lockClient({ keyPrefix: prefix });
    const waiter = lockClient({ keyPrefix: prefix });
    const waitOnce = async () => {
      const lock = holder.locks.getLock('hot');
      const held = await lock.lock({ leaseTime: 10_000 });
      const waiting = waiter.locks.getLock('hot').lock({ leaseTime: 5_000 });
      // Refused and registered: it waits (released sooner, it would take the lock at its first attempt).
      await eventually(async () => (await holder.redis.zcard(lock.keys.waiting)) === 1, 5_000);
      await held.release();
      await (await waiting).release();
    };
    try {
      await test({ holder, waiter, waitOnce });
    } finally {
      await holder.close();
      await waiter.close();
    }
  }

  it('a hot key keeps its subscription between waits, then unsubscribes when nobody waits', () =>
    withHotKey(async ({ holder, waiter, waitOnce }) => {
      const subscribes = jest.spyOn(RedisPubSub.prototype, 'subscribe');
      for (let round = 0; round < 3; round++) await waitOnce();
      const channel = processChannel(waiter, waiter.locks.getLock('hot'));
      const sent = subscribes.mock.calls.filter(([c]) => c === channel).length;
      subscribes.mockRestore();
      expect(sent).toBe(1); // one SUBSCRIBE for three contended acquisitions
      expect(await numsub(holder, channel)).toBe(1);
      await eventually(async () => (await numsub(holder, channel)) === 0, 10_000);
    }));

  it('a wait inside the linger keeps the subscription until SUBSCRIPTION_LINGER_MS after the last wait, not the first', () =>
    withHotKey(async ({ holder, waiter, waitOnce }) => {
      await waitOnce();
      const firstLeft = Date.now();
      await sleep(SUBSCRIPTION_LINGER_MS * 0.6);
      await waitOnce();
      const lastLeft = Date.now();
      const channel = processChannel(waiter, waiter.locks.getLock('hot'));
      // Past the linger counted from the first wait, well before the one counted from the last.
      await sleep(Math.max(0, firstLeft + SUBSCRIPTION_LINGER_MS + 300 - Date.now()));
      expect(Date.now() - lastLeft).toBeLessThan(SUBSCRIPTION_LINGER_MS - 300);
      expect(await numsub(holder, channel)).toBe(1);
      await eventually(async () => (await numsub(holder, channel)) === 0, 10_000);
    }));
});
