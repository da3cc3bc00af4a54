// One process of test/kinds/multi-lock-processes.spec.ts's race on tied names: a MultiLock of the lock
// LOCK_NAME on each server of REDIS_PORTS (comma-separated), named in that order (the other process
// names them the other way round), taken with WAIT_MS as its waitTime, from START_AT for DURATION_MS.
// Inside, a racy GET / SET of COUNTER_KEY on the server at COUNTER_PORT: overlapping holders lose updates.
// Prints how many sections it ran and how many acquisitions timed out.
import Redis from 'ioredis';
import { LockAcquireTimeoutError, LockClient, MultiLock } from '../../lib';
import { silentLogger, sleep } from '../../scripts/tooling';
import { raceStart } from './worker-client';

const env = process.env;

async function main(): Promise<void> {
  const servers = env.REDIS_PORTS!.split(',').map((port) => new Redis({ host: '127.0.0.1', port: Number(port) }));
  const clients = servers.map((redis) => new LockClient({ redis, keyPrefix: env.KEY_PREFIX, logger: silentLogger }));
  const tied = new MultiLock(clients.map((client) => client.getLock(env.LOCK_NAME!)));
  const counter = new Redis({ host: '127.0.0.1', port: Number(env.COUNTER_PORT) });
  await Promise.all([...servers, counter].map((s) => s.ping()));

  let sections = 0;
  let timedOut = 0;
  await raceStart();
  const until = Date.now() + Number(env.DURATION_MS);
  while (Date.now() < until) {
    try {
      await tied.withLock(
        async () => {
          const value = Number(await counter.get(env.COUNTER_KEY!));
          await sleep(1); // widen the race window
          await counter.set(env.COUNTER_KEY!, String(value + 1));
        },
        { waitTime: Number(env.WAIT_MS) },
      );
      sections++;
    } catch (error) {
      if (!(error instanceof LockAcquireTimeoutError)) throw error;
      timedOut++;
    }
  }
  await Promise.all(clients.map((c) => c.close()));
  [...servers, counter].forEach((s) => s.disconnect());
  console.log(JSON.stringify({ sections, timedOut }));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
