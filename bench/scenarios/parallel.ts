/**
 * Parallel capacity: one process, many keys at once. `parallelKeys` loops each acquire and release
 * their own key as fast as they can over one ioredis connection; no two loops ever contend.
 */
import Redis from 'ioredis';
import { nowMs } from '../lib/clock';
import type { BenchContext } from '../lib/context';
import { contendersFor, createContender, type Contender, type ContenderId } from '../lib/contenders';
import { median } from '../lib/stats';

export interface ParallelResult {
  /** Acquisitions per second (each followed by its release), median over rounds. */
  rows: Partial<Record<ContenderId, { perSecond: number }>>;
  keys: number;
  durationMs: number;
}

async function measure(c: Contender, keyBase: string, keys: number, durationMs: number): Promise<number> {
  let count = 0;
  let stop = false;
  const loop = async (i: number): Promise<void> => {
    const key = `${keyBase}:${i}`;
    while (!stop) {
      const release = await c.acquire(key);
      await release();
      count++;
    }
  };
  const started = nowMs();
  const loops = Array.from({ length: keys }, (_, i) => loop(i));
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  stop = true;
  const counted = count;
  const elapsed = nowMs() - started;
  await Promise.all(loops);
  return (counted / elapsed) * 1000;
}

export async function runParallel(ctx: BenchContext): Promise<ParallelResult> {
  const { parallelKeys: keys, parallelMs: durationMs, rounds } = ctx.config;
  const redis = new Redis({ port: ctx.port, host: '127.0.0.1' });
  const ids = contendersFor(ctx.config.contenders, 'locks');
  const contenders = ids.map((id) => createContender(id, redis));
  await Promise.all(contenders.map((c) => c.ready()));
  const perRound = new Map<ContenderId, number[]>(ids.map((id) => [id, []]));
  try {
    for (const c of contenders) await measure(c, `${ctx.tag}:p:${c.id}`, keys, 100); // warm-up
    for (let round = 0; round < rounds; round++) {
      for (const c of contenders) {
        const perSecond = await measure(c, `${ctx.tag}:p:${c.id}`, keys, durationMs);
        perRound.get(c.id)!.push(perSecond);
        ctx.log(
          `  parallel r${round + 1} ${c.id.padEnd(13)} ${Math.round(perSecond)} acquisitions/s over ${keys} keys`,
        );
      }
    }
  } finally {
    for (const c of contenders) await c.close();
    redis.disconnect();
  }
  const rows = Object.fromEntries(ids.map((id) => [id, { perSecond: median(perRound.get(id)!) }])) as Partial<
    Record<ContenderId, { perSecond: number }>
  >;
  return { rows, keys, durationMs };
}
