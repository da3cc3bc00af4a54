// Races on one lock through a failover: every critical section records its [start, end] in
// high-resolution epoch time (comparable across processes), so the test can count double grants.
// Errors while Redis fails over are counted and retried, never fatal.
import { RedisUnavailableError } from '../../lib';
import { sleep, workerClient, workerLock } from './worker-client';
import { epochNow } from '../../scripts/tooling';

/**
 * The worker's first connection, tried again for up to 30 s: what the test measures is the failover
 * mid-run, and beside the rest of the suite on 2 CPUs a start-up against freshly started sentinels
 * once took longer than the connect deadline (9 s).
 */
async function connected(): ReturnType<typeof workerClient> {
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      return await workerClient();
    } catch (error) {
      if (!(error instanceof RedisUnavailableError) || Date.now() > until) throw error;
      await sleep(250);
    }
  }
}

async function main(): Promise<void> {
  const { redis, locks } = await connected();
  const lock = workerLock(locks, process.env.LOCK_NAME!);
  const until = Date.now() + Number(process.env.DURATION_MS);
  const intervals: [number, number][] = [];
  const errors: string[] = [];
  while (Date.now() < until) {
    try {
      await lock.withLock(
        async () => {
          const start = epochNow();
          const value = Number(await redis.get(process.env.COUNTER_KEY!));
          await redis.set(process.env.COUNTER_KEY!, String(value + 1));
          intervals.push([start, epochNow()]);
        },
        { waitTime: 5_000 },
      );
    } catch (error) {
      const { name, message } = error as Error;
      errors.push(name === 'Error' ? `Error(${message.slice(0, 50)})` : name);
      await sleep(50);
    }
  }
  await locks.close();
  console.log(JSON.stringify({ intervals, errors }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
