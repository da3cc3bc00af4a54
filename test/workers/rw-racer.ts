// Readers and writers of one read-write lock (LOCK_NAME) from CONCURRENCY loops of this process,
// for DURATION_MS from the moment the test writes a line to stdin (after every racer printed "ready":
// starting 8 processes on a busy machine can take longer than any fixed start time). Each loop picks the write side with probability WRITE_RATIO.
// Inside the lock it checks the invariant on counters in Redis: READERS_KEY / WRITERS_KEY count the
// current holders of each side (INCR on enter, DECR on leave); a writer must see itself alone, a
// reader no writer. Writers also increment COUNTER_KEY with GET then SET (racy without the lock) and
// append their fencing token to TOKENS_KEY. Prints { reads, writes, violations, maxReaders }.
import { randomInt } from 'node:crypto';
import { runInLockScope } from '../../lib';
import { sleep, workerClient } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const env = process.env;
  const rw = locks.getReadWriteLock(env.LOCK_NAME!);
  const writeRatio = Number(env.WRITE_RATIO ?? 0.3);
  const [readersKey, writersKey] = [env.READERS_KEY!, env.WRITERS_KEY!];
  const violations: string[] = [];
  let reads = 0;
  let writes = 0;
  let maxReaders = 0;

  async function read(): Promise<void> {
    await rw.readLock().withLock(async () => {
      const readers = await redis.incr(readersKey);
      maxReaders = Math.max(maxReaders, readers);
      const writers = Number(await redis.get(writersKey));
      if (writers !== 0) violations.push(`reader saw ${writers} writer(s)`);
      await sleep(randomInt(1, 6)); // hold a little, so readers overlap
      const after = Number(await redis.get(writersKey));
      if (after !== 0) violations.push(`a writer entered while reading (${after})`);
      await redis.decr(readersKey);
    });
    reads++;
  }

  async function write(): Promise<void> {
    await rw.writeLock().withLock(async ({ fencingToken }) => {
      const writers = await redis.incr(writersKey);
      const readers = Number(await redis.get(readersKey));
      if (writers !== 1 || readers !== 0) violations.push(`writer saw ${writers} writer(s), ${readers} reader(s)`);
      const value = Number(await redis.get(env.COUNTER_KEY!));
      await sleep(randomInt(0, 2)); // widen the race window
      await redis.set(env.COUNTER_KEY!, String(value + 1));
      await redis.rpush(env.TOKENS_KEY!, String(fencingToken));
      const readersAfter = Number(await redis.get(readersKey));
      if (readersAfter !== 0) violations.push(`a reader entered while writing (${readersAfter})`);
      await redis.decr(writersKey);
    });
    writes++;
  }

  const go = new Promise((resolve) => process.stdin.once('data', resolve));
  await redis.ping(); // connected
  console.log('ready');
  await go;
  const until = Date.now() + Number(env.DURATION_MS);
  const loop = () =>
    runInLockScope(
      async () => {
        while (Date.now() < until) await (Math.random() < writeRatio ? write() : read());
      },
      { newScope: true },
    );
  await Promise.all(Array.from({ length: Number(env.CONCURRENCY ?? 2) }, loop));
  await locks.close();
  console.log(JSON.stringify({ reads, writes, violations: violations.slice(0, 20), maxReaders }));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
