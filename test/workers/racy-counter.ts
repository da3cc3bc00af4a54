// Increments a plain Redis string with GET then SET (deliberately racy) under a lock, for
// DURATION_MS, starting at START_AT. Also appends each fencing token to TOKENS_KEY inside the lock,
// so the test can check tokens grow strictly in the order the lock was granted (with an explicit
// LEASE_MS, those pushed too late to be sure of it also go to TOKENS_KEY:late), and, with HOLDERS_KEY,
// each holder's client id in grant order, with (given QUEUE_KEY, a fair lock's queue) the client id of the
// process at the head of the queue during its hold.
import { raceStart, sleep, workerClient, workerLease, workerLock, workerRedLock } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const redLock = process.env.LOCK_KIND === 'redlock' ? workerRedLock(process.env.LOCK_NAME!) : undefined;
  const lock = redLock
    ? {
        withLock: (fn: (c: { fencingToken: number }) => Promise<void>) =>
          redLock.redLock.withLock(() => fn({ fencingToken: 0 })),
      }
    : workerLock(locks, process.env.LOCK_NAME!);
  const counterKey = process.env.COUNTER_KEY!;
  const tokensKey = process.env.TOKENS_KEY!;
  await raceStart();
  const until = Date.now() + Number(process.env.DURATION_MS);
  const lease = workerLease();
  const options = { leaseTime: lease };
  let increments = 0;
  while (Date.now() < until) {
    await lock.withLock(async ({ fencingToken }) => {
      const value = Number(await redis.get(counterKey));
      await sleep(Math.random() < 0.3 ? 1 : 0); // widen the race window
      await redis.set(counterKey, String(value + 1));
      if (!redLock) await redis.rpush(tokensKey, String(fencingToken)); // RedLock has no single token
      if (process.env.HOLDERS_KEY) {
        // With a fair lock's QUEUE_KEY, the queue as this holder sees it: the next grant must go to its head's process.
        const head = process.env.QUEUE_KEY ? await redis.lindex(process.env.QUEUE_KEY, 0) : null;
        const record = { client: locks.clientId, next: head === null ? null : queuedClient(head) };
        await redis.rpush(process.env.HOLDERS_KEY, JSON.stringify(record));
      }
      // An explicit lease runs out under a holder stalled past it (a loaded machine), and the next holder
      // may push first. The token is Redis's clock at the grant (µs), and a TIME sent after the push runs
      // after it: a push it shows inside the lease ran while this hold's lease was live; a later one is
      // named in TOKENS_KEY:late, for the test to leave out of the grant order.
      if (!redLock && lease !== undefined) {
        const [seconds, micros] = await redis.time();
        const sinceGrantUs = Number(seconds) * 1_000_000 + Number(micros) - fencingToken;
        if (sinceGrantUs >= lease * 950) await redis.rpush(`${tokensKey}:late`, String(fencingToken));
      }
    }, options);
    increments++;
  }
  console.log('loop done'); // tells a hang in the loop from one while closing (see raceCounter)
  await locks.close(); // closes the worker's connections too
  console.log('closed');
  await redLock?.close();
  console.log(JSON.stringify({ increments }));
  // What would still keep this process alive once everything is closed (a leak to look into), then
  // exit: the race's result is in, and a lingering handle must not read as a hung race.
  const lingering = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap');
  if (lingering.length > 0) console.error(`still active after close: ${lingering.join(', ')}`);
  process.exit(0);
}

/** The client id in a fair queue entry: '<owner>', a NUL, '<client id>:<n>' (see lua/include/fair-hand-over.lua). */
function queuedClient(entry: string): string | null {
  const waiterId = entry.slice(entry.indexOf('\0') + 1);
  const cut = waiterId.lastIndexOf(':');
  return cut < 0 ? null : waiterId.slice(0, cut);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
