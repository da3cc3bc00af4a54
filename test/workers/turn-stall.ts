// Waits for LOCK_NAME (LOCK_KIND, TURN_MS), and once granted, inside its turn, releases it, takes it
// again and releases it again, then blocks its event loop for STALL_MS: a process that stalls right
// after a release in a contended turn. Prints "released <ms since epoch>" before the stall and
// "stalled <ms since epoch>" after it, then the JSON result. Each hold marks OCCUPANCY_KEY (SET NX)
// and clears it before its release: `overlapped` says a mark of another holder was found inside.
import { workerClient, workerLock } from './worker-client';

async function main(): Promise<void> {
  const { locks, redis } = await workerClient();
  const lock = workerLock(locks, process.env.LOCK_NAME!);
  const occupancy = process.env.OCCUPANCY_KEY!;
  let overlapped = false;
  const enter = async () => void ((await redis.set(occupancy, 'A', 'NX')) !== 'OK' && (overlapped = true));
  const leave = async () => void (await redis.del(occupancy));
  const first = await lock.lock();
  const grantedAt = Date.now();
  await enter();
  await leave();
  await first.release();
  const second = await lock.lock();
  await enter();
  await leave();
  await second.release();
  const releasedAt = Date.now();
  console.log(`released ${releasedAt}`);
  const stallUntil = releasedAt + Number(process.env.STALL_MS);
  while (Date.now() < stallUntil); // synchronous: no timer, no reply, no message runs meanwhile
  const stalledAt = Date.now();
  console.log(`stalled ${stalledAt}`);
  await locks.close();
  const tokens = [first.fencingToken, second.fencingToken];
  console.log(JSON.stringify({ grantedAt, releasedAt, stalledAt, tokens, overlapped }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
