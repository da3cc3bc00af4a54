/**
 * Uncontended latency: one caller, one key, acquire then release, over and over. A PING on the same
 * ioredis connection, sent right before each acquisition, is the round-trip unit the latencies are
 * divided by (so both see the same moment of the machine).
 */
import Redis from 'ioredis';
import { nowMs } from '../lib/clock';
import type { BenchContext } from '../lib/context';
import { CLIENT_COMMANDS, contendersFor, createContender, type Contender, type ContenderId } from '../lib/contenders';
import { median, medianOfRounds, percentile } from '../lib/stats';

export interface UncontendedRow {
  acquireP50: number;
  acquireP99: number;
  releaseP50: number;
  releaseP99: number;
  pingP50: number;
  /** p50 latency / the same round's PING p50 */
  acquireRtt: number;
  releaseRtt: number;
  /** Client CPU (user + system) per acquire + release, µs, PINGs excluded. */
  clientCpuUs: number;
  /** Redis time per acquire + release (INFO commandstats usec, PINGs excluded), µs. */
  redisUs: number;
}

export interface UncontendedResult {
  rows: Partial<Record<ContenderId, UncontendedRow>>;
  /** Median over rounds of the PING p50: the round-trip unit used everywhere. */
  rttMs: number;
  rttP99Ms: number;
  iterations: number;
}

/** What `timeCycles` measured: each iteration's PING, acquire and release (ms), and the client CPU per cycle (µs). */
export interface CycleTimes {
  ping: number[];
  acquire: number[];
  release: number[];
  cpuUs: number;
}

/**
 * `n` iterations of: `ping` (the round-trip unit, measured in the same moment), then `acquire`, then the
 * release it returns. Client CPU counts the acquire and the release, not the PING.
 */
export async function timeCycles(
  ping: () => Promise<unknown>,
  acquire: () => Promise<() => Promise<unknown>>,
  n: number,
): Promise<CycleTimes> {
  const times: CycleTimes = { ping: [], acquire: [], release: [], cpuUs: 0 };
  let cpuUs = 0;
  for (let i = 0; i < n; i++) {
    const p0 = nowMs();
    await ping();
    times.ping.push(nowMs() - p0);
    const cpu = process.cpuUsage();
    const t0 = nowMs();
    const done = await acquire();
    const t1 = nowMs();
    await done();
    const t2 = nowMs();
    const used = process.cpuUsage(cpu);
    cpuUs += used.user + used.system;
    times.acquire.push(t1 - t0);
    times.release.push(t2 - t1);
  }
  times.cpuUs = cpuUs / n;
  return times;
}

/** Each iteration: a PING on the contender's connection, then acquire, then release. */
function cycle(redis: Redis, contender: Contender, key: string, n: number): Promise<CycleTimes> {
  return timeCycles(
    () => redis.ping(),
    () => contender.acquire(key),
    n,
  );
}

/**
 * Redis time spent on the commands the contender itself sends. A script's usec already includes the
 * commands it calls, which commandstats also lists under their own names, so only top-level ones count.
 */
function lockUsec(commandstats: string, id: ContenderId): number {
  const topLevel = new Set(CLIENT_COMMANDS[id]);
  let usec = 0;
  for (const line of commandstats.split(/\r?\n/)) {
    const match = /^cmdstat_([^:]+):calls=\d+,usec=(\d+)/.exec(line);
    if (match && topLevel.has(match[1])) usec += Number(match[2]);
  }
  return usec;
}

export async function runUncontended(ctx: BenchContext): Promise<UncontendedResult> {
  const n = ctx.config.uncontendedIterations;
  const ids = contendersFor(ctx.config.contenders, 'uncontended');
  const redis = new Redis({ port: ctx.port, host: '127.0.0.1' });
  const contenders = ids.map((id) => createContender(id, redis));
  await Promise.all(contenders.map((c) => c.ready()));
  const perRound = new Map<ContenderId, UncontendedRow[]>(ids.map((id) => [id, []]));
  const pings: { p50: number; p99: number }[] = [];
  try {
    // Warm-up: script loading, JIT, connection buffers.
    for (const c of contenders) await cycle(redis, c, `${ctx.tag}:u:${c.id}`, 200);

    for (let round = 0; round < ctx.config.rounds; round++) {
      for (const c of contenders) {
        await ctx.admin.config('RESETSTAT');
        const { ping, acquire, release, cpuUs } = await cycle(redis, c, `${ctx.tag}:u:${c.id}`, n);
        const redisUs = lockUsec(await ctx.admin.info('commandstats'), c.id) / n;
        const pingP50 = percentile(ping, 50);
        pings.push({ p50: pingP50, p99: percentile(ping, 99) });
        const row: UncontendedRow = {
          acquireP50: percentile(acquire, 50),
          acquireP99: percentile(acquire, 99),
          releaseP50: percentile(release, 50),
          releaseP99: percentile(release, 99),
          pingP50,
          acquireRtt: percentile(acquire, 50) / pingP50,
          releaseRtt: percentile(release, 50) / pingP50,
          clientCpuUs: cpuUs,
          redisUs,
        };
        perRound.get(c.id)!.push(row);
        ctx.log(
          `  uncontended r${round + 1} ${c.id.padEnd(13)} acquire p50 ${row.acquireP50.toFixed(3)} ms (${row.acquireRtt.toFixed(2)} RTT), release p50 ${row.releaseP50.toFixed(3)} ms (${row.releaseRtt.toFixed(2)} RTT), PING ${pingP50.toFixed(3)} ms, client CPU ${cpuUs.toFixed(0)} µs/cycle, Redis ${redisUs.toFixed(1)} µs/cycle`,
        );
      }
    }
  } finally {
    for (const c of contenders) await c.close();
    redis.disconnect();
  }
  const rows = Object.fromEntries(ids.map((id) => [id, medianOfRounds(perRound.get(id)!)])) as Partial<
    Record<ContenderId, UncontendedRow>
  >;
  return { rows, rttMs: median(pings.map((p) => p.p50)), rttP99Ms: median(pings.map((p) => p.p99)), iterations: n };
}
