import { acquireLoop, type Attempt } from '../../lib/engine/waiting/acquire-loop';
import { engineOf } from '../../lib/internal';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * The acquire loop's first attempt on a channel this process already listens on (a hot key). The
 * attempts are scripted (they stand for a lock kind's script calls); the waiting is the client's own,
 * on a real subscription.
 */
describe('acquire loop on a subscribed channel', () => {
  const prefix = testPrefix();
  let client: TestClient;

  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix });
  });
  afterAll(() => client.close());

  /** Subscribes `channel` and leaves it lingering, as a hot key's channel is between waits. */
  async function liveChannel(channel: string) {
    const { waiters } = engineOf(client.locks);
    const seat = waiters.join(channel);
    await seat.subscribed;
    seat.ticket.leave();
    expect(waiters.isLive(channel)).toBe(true);
    return waiters;
  }

  /** An attempt refused the first time (a lease a minute long) and granted after. */
  function refusedOnce() {
    const at: number[] = [];
    const attempt = async (): Promise<Attempt<string>> => {
      at.push(Date.now());
      return at.length === 1 ? { acquired: false, ttl: 60_000 } : { acquired: true, value: 'granted' };
    };
    return { at, attempt };
  }

  it('tries again at once when an attempt expected to be granted (no seat taken before it) is refused', async () => {
    const channel = `${prefix}:expected`;
    const waiters = await liveChannel(channel);
    const { at, attempt } = refusedOnce();
    const outcome = await acquireLoop({
      key: 'expected',
      channel,
      waiters,
      waitTime: 5_000,
      operationTimeout: 2_000,
      expectGrant: true,
      attempt,
    });
    expect(outcome).toEqual({ acquired: true, value: 'granted' });
    expect(at).toHaveLength(2);
    // At once: a release between the refusal and the seat went unheard, so no message may be waited for.
    expect(at[1] - at[0]).toBeLessThan(1_000);
  });

  it('otherwise takes its seat first, and after a refusal sleeps until a message wakes it', async () => {
    const channel = `${prefix}:seated`;
    const waiters = await liveChannel(channel);
    const { at, attempt } = refusedOnce();
    const outcome = acquireLoop({
      key: 'seated',
      channel,
      waiters,
      waitTime: 10_000,
      operationTimeout: 2_000,
      attempt,
    });
    await sleep(300);
    expect(at).toHaveLength(1); // seated before it tried: a release after the attempt is heard, no retry needed
    await client.redis.publish(channel, 'released');
    expect(await outcome).toEqual({ acquired: true, value: 'granted' });
    expect(at).toHaveLength(2);
  });
});
