// Enters semaphore SEMAPHORE_NAME (PERMITS permits) again and again for DURATION_MS from START_AT.
// Inside, it counts the current holders in Redis (INCR on entry, DECR on leaving, COUNTER_KEY) and
// records the highest count it saw, so the test can check that never more than PERMITS were inside.
import { raceStart, sleep, workerClient } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const permits = Number(process.env.PERMITS);
  const semaphore = locks.getSemaphore(process.env.SEMAPHORE_NAME!, { permits });
  const counterKey = process.env.COUNTER_KEY!;
  await raceStart();
  const until = Date.now() + Number(process.env.DURATION_MS);
  let entries = 0;
  let maxInside = 0;
  while (Date.now() < until) {
    await semaphore.withPermits(async () => {
      const inside = await redis.incr(counterKey);
      maxInside = Math.max(maxInside, inside);
      await sleep(2 + Math.random() * 8); // hold it a little, so that holders overlap
      await redis.decr(counterKey);
    });
    entries++;
  }
  await locks.close();
  console.log(JSON.stringify({ entries, maxInside }));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
