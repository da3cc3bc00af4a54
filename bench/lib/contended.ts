import { lockKeys } from './subject';
import { sleep } from '../../scripts/tooling';
import { nowMs } from './clock';
import type { BenchContext } from './context';
import { CLIENT_COMMANDS, type ContenderId } from './contenders';
import { counterKey, type SharedSection } from './protocol';
import { commandStats, lockCommandCalls, serverCpuSeconds } from './redis-stats';
import { jain, max, medianOfRounds, percentile, sum } from './stats';

/** One contender on one hot key, spread over worker processes, measured over a window. */
export interface ContendedMeasurement {
  processes: number;
  contenders: number;
  /** Grants inside the window, and per second. */
  acquisitions: number;
  perSecond: number;
  waitP50: number;
  waitP99: number;
  waitMax: number;
  handoffP50: number;
  handoffP99: number;
  /** Hand-offs where the lock moved to another process: share of grants, and their p50. */
  crossProcessShare: number;
  crossHandoffP50: number;
  /** Jain's index over processes of their grants in the window. */
  jain: number;
  /**
   * Critical sections run (whole run) minus the counter they incremented: overlapping holders. For
   * shared sections (SharedSection): how often more holders than the limit were inside.
   */
  lostUpdates: number;
  /** Shared sections: the most holders inside at once (0 otherwise). */
  maxInside: number;
  /** INFO commandstats delta over the window / grants, commands the clients sent (a script call = 1). */
  commandsPerAcq: number;
  /** INFO commandstats delta over the window / grants: every command Redis ran, inside Lua too. */
  executedPerAcq: number;
  /** Cross-check of commandsPerAcq: commands the clients sent, counted in the bench (critical section excluded). */
  sentPerAcq: number;
  /** Of those, how many were separate round trips (pipelines count once). */
  requestsPerAcq: number;
  /** Client CPU (all worker processes) per grant, ms. */
  clientCpuPerAcqMs: number;
  /** redis-server CPU per grant, ms. */
  redisCpuPerAcqMs: number;
  giveUps: number;
  /** commandstats delta per command, per grant, most frequent first. */
  executedByCommand: Record<string, number>;
}

/** The lock's Redis state, read at the end of the window (before the loops stop), for a window without grants. */
async function describeIfStalled(
  ctx: BenchContext,
  contender: ContenderId,
  key: string,
  stats: Map<string, number>,
): Promise<string> {
  const evalsha = stats.get('evalsha') ?? 0;
  if (evalsha > 0 && (stats.get('publish') ?? 0) > 0) return 'not stalled';
  const k = lockKeys('bench', key);
  const [type, pttl, holders, queue, deadlines] = await Promise.all([
    ctx.admin.type(k.lock),
    ctx.admin.pttl(k.lock),
    ctx.admin
      .type(k.lock)
      .then((t): Promise<unknown> => (t === 'hash' ? ctx.admin.hgetall(k.lock) : ctx.admin.get(k.lock))),
    ctx.admin.lrange(k.queue, 0, 4),
    ctx.admin.zrange(k.deadlines, 0, 4, 'WITHSCORES'),
  ]);
  const time = await ctx.admin.time();
  return JSON.stringify({
    contender,
    type,
    pttl,
    holders,
    queueHead: queue,
    deadlines,
    redisTimeMs: Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000),
    commands: Object.fromEntries(stats),
  });
}

/** Spreads `contenders` lock loops over at most `processes` workers, as evenly as possible. */
export function spread(contenders: number, processes: number): number[] {
  const p = Math.min(contenders, processes);
  return Array.from({ length: p }, (_, i) => Math.floor(contenders / p) + (i < contenders % p ? 1 : 0));
}

/**
 * `sectionMs`: how long each critical section sleeps between its read and its write (0: not at all).
 * `shared`: a shared-holders section instead (see SharedSection).
 */
export async function measureContended(
  ctx: BenchContext,
  contender: ContenderId,
  key: string,
  loops: number[],
  warmupMs: number,
  windowMs: number,
  sectionMs = 0,
  shared?: SharedSection,
): Promise<ContendedMeasurement> {
  const { pool, admin } = ctx;
  const active = await pool.run(contender, key, loops, sectionMs, shared);
  await sleep(warmupMs);
  await pool.mark(active);
  const cpuBefore = await serverCpuSeconds(admin);
  await admin.config('RESETSTAT');
  const windowStart = nowMs();
  await sleep(windowMs);
  const windowEnd = nowMs();
  const stats = await commandStats(admin);
  const cpuAfter = await serverCpuSeconds(admin);
  const stalled = await describeIfStalled(ctx, contender, key, stats);
  const results = await pool.collect(active, { windowStart, windowEnd });
  const counter = Number((await admin.get(counterKey(key))) ?? 0);

  const acquisitions = sum(results.map((r) => r.inWindow));
  if (acquisitions === 0)
    ctx.log(`  !! ${contender} on ${key}: no grant in the ${windowMs} ms window. At its end: ${stalled}`);
  const waits = results.flatMap((r) => r.waits);
  const handoffs = results.flatMap((r) => r.handoffs);
  const crossHandoffs = results.flatMap((r) => r.crossHandoffs);
  const executed = lockCommandCalls(stats);
  const perAcq = (n: number): number => (acquisitions > 0 ? n / acquisitions : NaN);
  const byCommand = Object.entries(executed.byCommand)
    .sort((a, b) => b[1] - a[1])
    .map(([name, calls]) => [name, perAcq(calls)] as const);
  const csRequests = sum(results.map((r) => r.csRequests));
  return {
    processes: loops.length,
    contenders: sum(loops),
    acquisitions,
    perSecond: (acquisitions / (windowEnd - windowStart)) * 1000,
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    waitMax: max(waits),
    handoffP50: percentile(handoffs, 50),
    handoffP99: percentile(handoffs, 99),
    crossProcessShare: handoffs.length > 0 ? crossHandoffs.length / handoffs.length : NaN,
    crossHandoffP50: percentile(crossHandoffs, 50),
    jain: jain(results.map((r) => r.inWindow)),
    lostUpdates: shared ? sum(results.map((r) => r.overLimit)) : sum(results.map((r) => r.total)) - counter,
    maxInside: max(results.map((r) => r.maxInside)),
    commandsPerAcq: perAcq(sum(CLIENT_COMMANDS[contender].map((name) => stats.get(name) ?? 0))),
    executedPerAcq: perAcq(executed.total),
    sentPerAcq: perAcq(sum(results.map((r) => r.sent.commands)) - csRequests),
    requestsPerAcq: perAcq(sum(results.map((r) => r.sent.requests)) - csRequests),
    clientCpuPerAcqMs: perAcq(sum(results.map((r) => r.cpuMs))),
    redisCpuPerAcqMs: perAcq((cpuAfter - cpuBefore) * 1000),
    giveUps: sum(results.map((r) => r.giveUps)),
    executedByCommand: Object.fromEntries(byCommand),
  };
}

/**
 * Runs `contender` on throwaway keys in 1 s windows until its processes have made `grants`
 * acquisitions between them (or `maxWindows` ran out). With 8 processes sharing one CPU each gets an
 * eighth of it, and V8 optimises a function only after it ran often enough: measured before that, a
 * lock with more code would be timed against the compiler rather than its peers. Counted in grants,
 * not seconds, because a slow start would otherwise look steady. Returns each window's throughput.
 * `sectionMs` as for measureContended.
 */
export async function warmUp(
  ctx: BenchContext,
  contender: ContenderId,
  key: string,
  loops: number[],
  grants: number,
  maxWindows: number,
  sectionMs = 0,
  shared?: SharedSection,
): Promise<number[]> {
  const rates: number[] = [];
  let done = 0;
  for (let i = 0; i < maxWindows && done < grants; i++) {
    const m = await measureContended(ctx, contender, `${key}:${i}`, loops, 100, 1_000, sectionMs, shared);
    rates.push(Math.round(m.perSecond));
    done += m.acquisitions;
  }
  return rates;
}

/** Medians over a contender's rounds; lost updates are the worst round's (correctness is never averaged away). */
export function summariseRounds(all: ContendedMeasurement[]): Omit<ContendedMeasurement, 'executedByCommand'> {
  const numeric = all.map(({ executedByCommand: _ignored, ...rest }) => rest);
  return { ...medianOfRounds(numeric), lostUpdates: Math.max(...all.map((m) => m.lostUpdates)) };
}

/** The eight commands Redis ran most per acquisition, for the progress log. */
export function topCommands(m: ContendedMeasurement): string {
  return JSON.stringify(
    Object.fromEntries(
      Object.entries(m.executedByCommand)
        .slice(0, 8)
        .map(([k, v]) => [k, Number(v.toFixed(2))]),
    ),
  );
}
