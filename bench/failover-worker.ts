/**
 * One OS process of the failover scenario (bench/scenarios/failover.ts), started with its settings in
 * the environment: it loops acquire -> racy read-modify-write of a counter on the bench's own,
 * never-faulted Redis -> release, on one key of a sentinel deployment, until "stop" on stdin, then
 * prints what it recorded as one JSON line (the shape of test/workers/fault-racer.ts's result).
 * Errors while the master is away are counted and retried after 50 ms.
 *
 * Ours: `createLockClient({ connection: { type: 'sentinel', … } })` with its defaults. The peers: an
 * ioredis client built the way their docs show for sentinel, `new Redis({ sentinels, name })`, all
 * other options at their defaults.
 */
import { createInterface } from 'node:readline';
import Redis from 'ioredis';
import type { LockClient } from '../lib';
import { createContender, type Contender, type ContenderId } from './lib/contenders';
import { createLockClient } from './lib/subject';
import { epochNow, silentLogger, sleep, type HostPort } from '../scripts/tooling';

const env = process.env;
const id = env.CONTENDER as ContenderId;
const sentinels = JSON.parse(env.SENTINELS!) as HostPort[];
const masterName = env.MASTER_NAME!;
const key = env.LOCK_KEY!;

async function ours(kind: 'reentrant' | 'fair'): Promise<Contender & { locks: LockClient }> {
  const locks = await createLockClient({
    connection: { type: 'sentinel', sentinels, masterName },
    keyPrefix: 'bench',
    logger: silentLogger,
  });
  return {
    id: kind,
    giveUps: 0,
    locks,
    async acquire(name, signal) {
      const lock = kind === 'fair' ? locks.getFairLock(name) : locks.getLock(name);
      const handle = await lock.lock({ waitTime: 10_000, signal });
      return () => handle.release();
    },
    ready: async () => undefined,
    close: () => locks.close(),
  };
}

async function main(): Promise<void> {
  const counter = new Redis({ host: '127.0.0.1', port: Number(env.COUNTER_PORT) });
  const peerClient =
    id === 'reentrant' || id === 'fair' ? undefined : new Redis({ sentinels, name: masterName, lazyConnect: true });
  peerClient?.on('error', () => undefined);
  await peerClient?.connect();
  const contender = id === 'reentrant' || id === 'fair' ? await ours(id) : createContender(id, peerClient!);
  await Promise.all([contender.ready(), counter.ping()]);

  const stop = new AbortController();
  createInterface({ input: process.stdin }).on('line', (line) => line === 'stop' && stop.abort());
  console.log('ready');

  const sections: [number, number, number, number][] = [];
  // As in the fault suite: a section that finds another holder inside is a double grant (no clock involved).
  const insideKey = `${env.COUNTER_KEY}:inside`;
  let crowded = 0;
  const errors: Record<string, number> = {};
  const count = (error: unknown): void => {
    const name =
      (error as Error).name === 'Error' ? `Error(${(error as Error).message.slice(0, 40)})` : (error as Error).name;
    errors[name] = (errors[name] ?? 0) + 1;
  };
  while (!stop.signal.aborted) {
    const requested = epochNow();
    let release;
    try {
      release = await contender.acquire(key, stop.signal);
    } catch (error) {
      if (stop.signal.aborted) break;
      count(error);
      await sleep(50);
      continue;
    }
    const start = epochNow();
    if ((await counter.incr(insideKey)) > 1) crowded++;
    const value = Number(await counter.get(env.COUNTER_KEY!));
    await counter.set(env.COUNTER_KEY!, String(value + 1));
    await counter.decr(insideKey);
    sections.push([requested, start, epochNow(), 0]);
    await release().catch(count);
  }
  await contender.close().catch(() => undefined);
  peerClient?.disconnect();
  counter.disconnect();
  console.log(
    JSON.stringify({
      pid: process.pid,
      sections,
      crowded,
      errors,
      lost: {},
      releases: {},
      fenced: { accepted: 0, rejected: 0 },
    }),
  );
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
