import { lockClient, sleep, testPrefix } from '../support/engine';

/** LockClient.health(): each part checked against a state the test creates. */
describe('LockClient.health', () => {
  const prefix = testPrefix();

  it('healthy when idle: PING answered, the lazy subscriber not yet needed, nothing watched', async () => {
    const client = lockClient({ keyPrefix: prefix });
    try {
      const health = await client.locks.health();
      expect(health.healthy).toBe(true);
      expect(health.redis).toMatchObject({ healthy: true, status: 'ready' });
      expect(health.watchdog).toEqual({ healthy: true, watchedLocks: 0, lagMs: 0 });
      expect(health.subscriber.healthy).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('a blocked event loop shows as watchdog lag while watched locks are held', async () => {
    // Renewals every second. A lease of 3 s, not less: a loaded machine's stall before the block must
    // not lose the hold (a lost hold is no longer watched, and shows no lag), and the block ends
    // before the lease that the grant set does.
    const client = lockClient({ keyPrefix: prefix, watchdogTimeout: 3_000 });
    try {
      const handle = await client.locks.getLock('watched').lock();
      await sleep(150);
      expect((await client.locks.health()).watchdog.healthy).toBe(true);
      const until = Date.now() + 2_200;
      while (Date.now() < until); // no renewal can run meanwhile
      const lagging = await client.locks.health();
      expect(lagging.healthy).toBe(false);
      expect(lagging.watchdog.healthy).toBe(false);
      expect(lagging.watchdog.watchedLocks).toBe(1);
      expect(lagging.watchdog.lagMs).toBeGreaterThan(1_000);
      await sleep(300); // renewals resume
      expect((await client.locks.health()).healthy).toBe(true);
      await handle.release();
    } finally {
      await client.close();
    }
  });

  it('a closed lock connection is unhealthy, with the error', async () => {
    const client = lockClient({ keyPrefix: prefix });
    client.redis.disconnect();
    const health = await client.locks.health();
    expect(health.healthy).toBe(false);
    expect(health.redis.healthy).toBe(false);
    expect(health.redis.error).toBeDefined();
    await client.close();
  });
});
