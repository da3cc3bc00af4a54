// One racing process of test/faults/redlock.spec.ts: RedLock over the masters in REDLOCK_PORTS, built
// as a user would, with ioredis clients at their defaults (offline queue, 20 retries per request,
// auto-reconnect). Loops on LOCK_NAME until "stop" on stdin; inside each critical section a racy
// GET / SET of COUNTER_KEY on a never-faulted Redis (COUNTER_PORT), so overlapping holders lose
// updates, and counts the sections that found another process inside. Records [requested, start, end]
// of every section in high-resolution epoch ms (comparable across the processes of one machine to a few
// ms). Prints "ready" once connected, its result as JSON at the end. RESTART_QUARANTINE (ms, optional): the
// RedLock's restartQuarantine.
import { createInterface } from 'node:readline';
import Redis from 'ioredis';
import { LockClient, RedLock } from '../../lib';
import { epochNow, silentLogger } from '../../scripts/tooling';

export interface RedLockRacerResult {
  /** One per critical section: [requested, start, end]. */
  sections: [number, number, number][];
  /** Errors of withLock, by name (a lock that could not be taken, never a double grant). */
  errors: Record<string, number>;
  /** Sections that found another process inside, counted on the counter server (no clock involved). */
  crowded: number;
}

const env = process.env;

async function main(): Promise<void> {
  const masters = env.REDLOCK_PORTS!.split(',').map((port) => new Redis({ host: '127.0.0.1', port: Number(port) }));
  const clients = masters.map((redis) => new LockClient({ redis, keyPrefix: env.KEY_PREFIX, logger: silentLogger }));
  const redLock = new RedLock(clients, env.LOCK_NAME!, { restartQuarantine: Number(env.RESTART_QUARANTINE ?? 0) });
  const counter = new Redis({ host: '127.0.0.1', port: Number(env.COUNTER_PORT) });
  const counterKey = env.COUNTER_KEY!;
  await Promise.all([...masters, counter].map((r) => r.ping()));

  let stopped = false;
  createInterface({ input: process.stdin }).on('line', (line) => (stopped ||= line === 'stop'));
  console.log('ready');

  const insideKey = `${counterKey}:inside`;
  const result: RedLockRacerResult = { sections: [], errors: {}, crowded: 0 };
  while (!stopped) {
    const requested = epochNow();
    try {
      await redLock.withLock(
        async () => {
          const start = epochNow();
          if ((await counter.incr(insideKey)) > 1) result.crowded++;
          const value = Number(await counter.get(counterKey));
          await new Promise((resolve) => setTimeout(resolve, 1)); // widen the race window
          await counter.set(counterKey, String(value + 1));
          await counter.decr(insideKey);
          result.sections.push([requested, start, epochNow()]);
        },
        { waitTime: 10_000 },
      );
    } catch (error) {
      const name = (error as Error).name;
      result.errors[name] = (result.errors[name] ?? 0) + 1;
    }
  }
  console.log(JSON.stringify(result));
  // Closing clients of dead masters would wait on their reconnects: the process just ends.
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
