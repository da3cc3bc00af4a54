// Enters semaphore SEMAPHORE_NAME (PERMITS permits) for DURATION_MS from START_AT, from one loop per
// entry of WANTS (comma-separated permits per acquisition, e.g. '1,3': a loop taking 1 and a loop
// taking 3 at once, so the process waits for several sizes at a time). Inside, it counts the permits
// held in Redis (INCRBY on entry, DECRBY on leaving, COUNTER_KEY) and records the highest count it saw,
// so the test can check that never more than PERMITS were held.
import { raceStart, sleep, workerClient } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const permits = Number(process.env.PERMITS);
  const semaphore = locks.getSemaphore(process.env.SEMAPHORE_NAME!, { permits });
  const counterKey = process.env.COUNTER_KEY!;
  const wants = process.env.WANTS!.split(',').map(Number);
  await raceStart();
  const until = Date.now() + Number(process.env.DURATION_MS);
  const entries = wants.map(() => 0);
  let maxInside = 0;
  await Promise.all(
    wants.map(async (want, loop) => {
      while (Date.now() < until) {
        await semaphore.withPermits(
          async () => {
            const inside = await redis.incrby(counterKey, want);
            maxInside = Math.max(maxInside, inside);
            await sleep(2 + Math.random() * 8); // hold it a little, so that holders overlap
            await redis.decrby(counterKey, want);
          },
          { permits: want },
        );
        entries[loop]++;
      }
    }),
  );
  await locks.close();
  console.log(JSON.stringify({ entries, maxInside }));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
