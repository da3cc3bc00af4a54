import { killAll, raceCounter, startWorker, type Worker } from '../support/workers';
import { lockClient, singlePort, testPrefix, type TestClient } from '../support/engine';

describe('reentrant lock across OS processes', () => {
  const prefix = testPrefix();
  let client: TestClient;
  const workers: Worker[] = [];

  beforeAll(() => (client = lockClient({ keyPrefix: prefix })));
  afterEach(() => killAll(workers));
  afterAll(() => client.close());

  // Both leases: the watchdog's, and an explicit one (each grant sets it in full).
  it.each(['watchdog', 'explicit'] as const)(
    '8 processes incrementing a racy counter for a few seconds lose no update; fencing tokens only grow (%s lease)',
    async (lease) => {
      const env = {
        REDIS_PORT: singlePort(),
        KEY_PREFIX: prefix,
        LOCK_NAME: `race-${lease}`,
        COUNTER_KEY: `${prefix}:counter:${lease}`,
        TOKENS_KEY: `${prefix}:tokens:${lease}`,
        DURATION_MS: 3_000,
        ...(lease === 'explicit' ? { LEASE_MS: 5_000 } : {}),
      };
      const { increments, total } = await raceCounter(8, env, workers);
      expect(increments.every((n) => n > 0)).toBe(true);
      expect(Number(await client.redis.get(env.COUNTER_KEY))).toBe(total);

      const tokens = (await client.redis.lrange(env.TOKENS_KEY, 0, -1)).map(Number);
      expect(tokens).toHaveLength(total);
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
    },
    60_000,
  );

  it('a holder killed with SIGKILL: a waiter elsewhere gets the lock when the lease runs out, not before, within lease + 1 s', async () => {
    const lease = 2_000;
    const holder = startWorker('hold-lock.ts', {
      REDIS_PORT: singlePort(),
      KEY_PREFIX: prefix,
      LOCK_NAME: 'killed',
      WATCHDOG_MS: lease,
    });
    workers.push(holder);
    await holder.waitFor('acquired');
    const lock = client.locks.getLock('killed');
    await new Promise((resolve) => setTimeout(resolve, lease)); // the watchdog renewed it meanwhile
    expect(await lock.isLocked()).toBe(true);

    holder.child.kill('SIGKILL');
    const killedAt = Date.now();
    const remaining = await client.redis.pttl(lock.keys.lock);
    const handle = await lock.lock({ leaseTime: 5_000 });
    const waited = Date.now() - killedAt;
    expect(waited).toBeGreaterThanOrEqual(remaining - 100);
    expect(waited).toBeLessThanOrEqual(lease + 1_000);
    await handle.release();
  }, 30_000);
});
