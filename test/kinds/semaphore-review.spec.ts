import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * Paths of the semaphore the happy tests do not take (a review): what a closed client, a wait cut short
 * or a hand-over can leave behind.
 */
describe('Semaphore review', () => {
  const prefix = testPrefix();
  let other: TestClient;
  let name: string;
  const open: TestClient[] = [];

  beforeAll(() => {
    other = lockClient({ keyPrefix: prefix });
  });
  beforeEach(() => (name = `rev-${Math.random().toString(36).slice(2)}`));
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  afterAll(() => other.close());

  it('a wait still running when its client is closed takes no permit afterwards (the ioredis client passed in stays open)', async () => {
    // The client's own redis is the application's: close() leaves it open.
    const closing = lockClient({ keyPrefix: prefix, watchdogTimeout: 1_500 });
    open.push(closing);
    const options = { permits: 1, staleWaiterTimeout: 600 }; // the waiter retries every 200 ms
    const semaphore = other.locks.getSemaphore(name, options);
    const held = await semaphore.acquire({ leaseTime: 30_000 });
    const waiting = closing.locks.getSemaphore(name, options).acquire();
    const outcome = waiting.then(
      () => 'acquired',
      (error: Error) => error.name,
    );
    await eventually(async () => (await other.redis.zcard(semaphore.keys.waiting)) === 1);
    await closing.locks.close();
    expect(await held.release()).toBe('released');
    // Past a few of the waiter's retries and of the closed client's watchdog ticks.
    await sleep(4_000); // the closed client's watchdog lease (1.5 s) over twice
    expect(await Promise.race([outcome, sleep(0).then(() => 'still waiting')])).toBe('LockError');
    expect(await semaphore.availablePermits()).toBe(1);
    expect(await other.redis.zcard(semaphore.keys.waiting)).toBe(0); // and it left the queue
  });
});
