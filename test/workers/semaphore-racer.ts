// Enters semaphore SEMAPHORE_NAME (PERMITS permits) again and again for DURATION_MS from START_AT, in
// LOOPS concurrent loops (default 1). Inside, it counts the current holders in Redis (INCR on entry,
// DECR on leaving, COUNTER_KEY) and records the highest count it saw, so the test can check that never
// more than PERMITS were inside. With RACY_KEY it also adds 1 to that key with GET then SET (racy: two
// holders at once lose an update), for a semaphore of 1 permit.
import { raceStart, sleep, workerClient } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const permits = Number(process.env.PERMITS);
  const semaphore = locks.getSemaphore(process.env.SEMAPHORE_NAME!, { permits });
  const counterKey = process.env.COUNTER_KEY!;
  const racyKey = process.env.RACY_KEY;
  await raceStart();
  const until = Date.now() + Number(process.env.DURATION_MS);
  let entries = 0;
  let maxInside = 0;
  const loop = async () => {
    while (Date.now() < until) {
      await semaphore.withPermits(async () => {
        const inside = await redis.incr(counterKey);
        maxInside = Math.max(maxInside, inside);
        const value = racyKey ? Number(await redis.get(racyKey)) : 0;
        await sleep(2 + Math.random() * 8); // hold it a little, so that holders overlap
        if (racyKey) await redis.set(racyKey, String(value + 1));
        await redis.decr(counterKey);
      });
      entries++;
    }
  };
  await Promise.all(Array.from({ length: Number(process.env.LOOPS ?? 1) }, loop));
  await locks.close();
  console.log(JSON.stringify({ entries, maxInside }));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
