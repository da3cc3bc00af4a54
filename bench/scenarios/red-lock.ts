/**
 * RedLock: ours against `@sesamecare-oss/redlock` on the same five independent masters (a 'multi'
 * topology of its own, started here on PRIVATE_PORTS.benchRedLock and stopped at the end by the pids it
 * recorded). Round by round, each contender in turn:
 *
 * - uncontended: one caller in this process, one name, acquire then release, over and over. Before
 *   each acquisition a PING to every master at once (one round trip to each, sent together: what
 *   the least RedLock round costs) gives the round-trip unit, measured in the same moment.
 * - contended: `processes` worker processes (bench/red-lock-worker.ts), one loop each on one name;
 *   inside, a racy counter on the first master (GET, `sectionMs` sleep, SET), so two holders at once
 *   would lose an update. A warm-up, then a window in which grants, the commands the masters ran and
 *   the workers' CPU are counted.
 */
import { timeCycles, type UncontendedRow } from './uncontended';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import Redis from 'ioredis';
import { startTopology, stopTopology, terminateTopologySync, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { sleep } from '../../scripts/tooling';
import { nowMs } from '../lib/clock';
import type { BenchContext } from '../lib/context';
import { contendersFor, type ContenderId } from '../lib/contenders';
import { pinBesideRedis } from '../lib/pinning';
import type { FromRedLockWorker, RedLockWorkerResult, ToRedLockWorker } from '../lib/red-lock-protocol';
import { createRedLockSubject, mastersAt, type RedLockSubject, type RedLockSubjectId } from '../lib/red-lock-subjects';
import { jain, median, percentile, sum } from '../lib/stats';
import { Worker } from '../lib/worker-pool';

/**
 * The uncontended scenario's row (bench/scenarios/uncontended.ts) over five masters: its PING goes to every
 * master at once, and its Redis time and commands are the masters' together.
 */
export interface RedLockUncontendedRow extends UncontendedRow {
  /** Commands the client sent the masters per acquire + release, all masters together (INFO commandstats). */
  commandsPerCycle: number;
}

export interface RedLockContendedRound {
  perSecond: number;
  /** Commands the clients sent the masters per acquisition (scripts, (un)subscriptions; the section's GET and SET not counted). */
  commandsPerAcq: number;
  /** Every command the masters ran per acquisition, those inside Lua included (the section's GET and SET not counted). */
  executedPerAcq: number;
  /** The worker processes' CPU per acquisition, ms. */
  clientCpuPerAcqMs: number;
  /** The masters' time on the clients' commands per acquisition (commandstats usec, all masters together), µs. */
  redisUsPerAcq: number;
  waitP50: number;
  waitP99: number;
  jain: number;
  /** Critical sections run minus the counter's final value (0 unless two held it at once). */
  lostUpdates: number;
  giveUps: number;
}

export interface RedLockResult {
  masters: number;
  processes: number;
  sectionMs: number;
  warmupMs: number;
  windowMs: number;
  iterations: number;
  rounds: number;
  /** Median over rounds of the all-masters PING p50. */
  rttMs: number;
  /** Medians over rounds, with each round's row. */
  uncontended: Partial<Record<ContenderId, RedLockUncontendedRow & { rounds: RedLockUncontendedRow[] }>>;
  contended: Partial<Record<ContenderId, RedLockContendedRound & { rounds: RedLockContendedRound[] }>>;
}

/** What the clients send (everything else in commandstats runs inside their scripts, or is the section's). */
const CLIENT_COMMANDS = new Set([
  'evalsha',
  'eval',
  'script|load',
  'subscribe',
  'unsubscribe',
  'ssubscribe',
  'sunsubscribe',
]);
/** The bench's own commands, never the locks'. */
const BENCH_COMMANDS = new Set(['info', 'config|resetstat', 'ping']);

/**
 * Commands the masters ran since the last RESETSTAT (the bench's own excluded): the clients' own and
 * the time the masters spent on them (a script's time includes the commands it calls), and all of them.
 */
async function commandCounts(
  admins: Redis[],
): Promise<{ client: number; clientUsec: number; all: number; byName: Map<string, number> }> {
  const infos = await Promise.all(admins.map((m) => m.info('commandstats')));
  const byName = new Map<string, number>();
  let clientUsec = 0;
  for (const info of infos) {
    for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
      if (BENCH_COMMANDS.has(match[1]) || match[1].startsWith('config')) continue;
      byName.set(match[1], (byName.get(match[1]) ?? 0) + Number(match[2]));
      if (CLIENT_COMMANDS.has(match[1])) clientUsec += Number(match[3]);
    }
  }
  let client = 0;
  let all = 0;
  for (const [name, calls] of byName) {
    all += calls;
    if (CLIENT_COMMANDS.has(name)) client += calls;
  }
  return { client, clientUsec, all, byName };
}

const resetStats = (admins: Redis[]): Promise<unknown> => Promise.all(admins.map((m) => m.config('RESETSTAT')));

/** The median of each numeric field over the rounds, and the rounds themselves. */
function summarize<T extends object>(rounds: T[], worst: (keyof T)[] = []): T & { rounds: T[] } {
  const out = {} as Record<string, unknown>;
  for (const key of Object.keys(rounds[0]) as (keyof T & string)[]) {
    const values = rounds.map((r) => r[key] as number);
    out[key] = worst.includes(key) ? Math.max(...values) : median(values);
  }
  return { ...(out as T), rounds };
}

async function uncontendedRound(
  subject: RedLockSubject,
  admins: Redis[],
  name: string,
  n: number,
): Promise<RedLockUncontendedRow> {
  await resetStats(admins);
  const { ping, acquire, release, cpuUs } = await timeCycles(
    () => Promise.all(admins.map((m) => m.ping())),
    () => subject.acquire(name),
    n,
  );
  // What a release left to finish in the background lands before the commands are counted.
  await sleep(20);
  const { client, clientUsec } = await commandCounts(admins);
  const pingP50 = percentile(ping, 50);
  return {
    acquireP50: percentile(acquire, 50),
    acquireP99: percentile(acquire, 99),
    releaseP50: percentile(release, 50),
    releaseP99: percentile(release, 99),
    pingP50,
    acquireRtt: percentile(acquire, 50) / pingP50,
    releaseRtt: percentile(release, 50) / pingP50,
    clientCpuUs: cpuUs,
    commandsPerCycle: client / n,
    redisUs: clientUsec / n,
  };
}

type RedLockWorker = Worker<FromRedLockWorker, ToRedLockWorker>;

const WORKER = path.join(__dirname, '..', 'red-lock-worker.ts');

function startWorkers(count: number, ports: number[]): RedLockWorker[] {
  return Array.from({ length: count }, () => {
    // BENCH_WORKER_NODE_ARGS: extra node flags for the workers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
    const extra = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...extra, '--import', 'tsx', WORKER], {
      cwd: path.join(__dirname, '..', '..'),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, BENCH_REDLOCK_PORTS: ports.join(',') },
    });
    return new Worker<FromRedLockWorker, ToRedLockWorker>(child);
  });
}

async function contendedRound(
  ctx: BenchContext,
  workers: RedLockWorker[],
  admins: Redis[],
  id: RedLockSubjectId,
  round: number,
): Promise<RedLockContendedRound> {
  const { redLockWarmupMs: warmupMs, redLockWindowMs: windowMs, redLockSectionMs: sectionMs } = ctx.config;
  const name = `${ctx.tag}:hot:${id}:${round}`;
  const counterKey = `bench-rl:counter:${name}`;
  workers.forEach((w) => w.send({ type: 'run', subject: id, name, counterKey, sectionMs }));
  await Promise.all(workers.map((w) => w.next('started', 30_000)));
  await sleep(warmupMs);
  await resetStats(admins);
  workers.forEach((w) => w.send({ type: 'mark' }));
  await Promise.all(workers.map((w) => w.next('marked', 30_000)));
  const from = nowMs();
  await sleep(windowMs);
  const counts = await commandCounts(admins);
  const elapsedS = (nowMs() - from) / 1000;
  workers.forEach((w) => w.send({ type: 'stop' }));
  const results: RedLockWorkerResult[] = (await Promise.all(workers.map((w) => w.next('result', 60_000)))).map(
    (m) => m.result,
  );
  const inWindow = sum(results.map((r) => r.inWindow));
  // None in the window (a library whose contenders kept splitting the masters): per-acquisition figures are n/a.
  const acquisitions = inWindow > 0 ? inWindow : NaN;
  const counter = Number(await admins[0].get(counterKey));
  const waits = results.flatMap((r) => r.waits);
  // The section's GET and SET: one each per acquisition, on the first master.
  const section = (counts.byName.get('get') ?? 0) + (counts.byName.get('set') ?? 0);
  const sectionOnly = Math.min(section, 2 * acquisitions);
  return {
    perSecond: inWindow / elapsedS,
    commandsPerAcq: counts.client / acquisitions,
    executedPerAcq: (counts.all - sectionOnly) / acquisitions,
    clientCpuPerAcqMs: sum(results.map((r) => r.cpuMs)) / acquisitions,
    redisUsPerAcq: counts.clientUsec / acquisitions,
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    jain: jain(results.map((r) => r.inWindow)),
    lostUpdates: sum(results.map((r) => r.total)) - counter,
    giveUps: sum(results.map((r) => r.giveUps)),
  };
}

/** What is running, for the bench's exit and signal handlers. */
const live = { workers: [] as RedLockWorker[], topology: undefined as RunningTopology | undefined };

/** Kills the workers and the masters this scenario started, each by its pid, without waiting. */
export function stopRedLockSync(): void {
  for (const w of live.workers) if (!w.exited && w.child.pid) w.child.kill('SIGKILL');
  if (live.topology) terminateTopologySync(live.topology);
  live.topology = undefined;
}

async function closeWorkers(workers: RedLockWorker[]): Promise<void> {
  for (const w of workers) if (!w.exited && w.child.connected) w.child.send({ type: 'exit' } satisfies ToRedLockWorker);
  const deadline = Date.now() + 5_000;
  while (workers.some((w) => !w.exited) && Date.now() < deadline) await sleep(50);
  for (const w of workers) if (!w.exited && w.child.pid) w.child.kill('SIGKILL');
}

export async function runRedLock(ctx: BenchContext): Promise<RedLockResult> {
  const ids = contendersFor(ctx.config.contenders, 'redlock') as RedLockSubjectId[];
  const { redLockIterations: n, rounds } = ctx.config;
  const processes = ctx.config.hotProcesses;
  const topology = await startTopology('multi', {
    basePort: PRIVATE_PORTS.benchRedLock.base,
    name: 'bench-redlock',
    log: ctx.log,
  });
  live.topology = topology;
  const ports = topology.masters.map((m) => m.port);
  if (ctx.pinned && !pinBesideRedis(topology.nodes.map((node) => node.pid)))
    ctx.log('  redlock: could not pin the masters beside redis-server');
  const admins = mastersAt(ports);
  const connections = ids.map(() => mastersAt(ports));
  const subjects = ids.map((id, i) => createRedLockSubject(id, connections[i]));
  let workers: RedLockWorker[] = [];
  const uncontended = new Map<RedLockSubjectId, RedLockUncontendedRow[]>(ids.map((id) => [id, []]));
  const contended = new Map<RedLockSubjectId, RedLockContendedRound[]>(ids.map((id) => [id, []]));
  const pings: number[] = [];
  try {
    await Promise.all([...admins, ...connections.flat()].map((m) => m.ping()));
    workers = live.workers = startWorkers(processes, ports);
    await Promise.all(workers.map((w) => w.next('ready', 60_000)));
    // Warm-up: script loading, JIT, connections.
    for (const s of subjects) await uncontendedRound(s, admins, `${ctx.tag}:u:${s.id}`, 200);
    for (let round = 0; round < rounds; round++) {
      for (const s of subjects) {
        const row = await uncontendedRound(s, admins, `${ctx.tag}:u:${s.id}`, n);
        uncontended.get(s.id)!.push(row);
        pings.push(row.pingP50);
        ctx.log(
          `  redlock uncontended r${round + 1} ${s.id.padEnd(15)} acquire p50 ${row.acquireP50.toFixed(3)} ms (${row.acquireRtt.toFixed(2)} RTT), release p50 ${row.releaseP50.toFixed(3)} ms (${row.releaseRtt.toFixed(2)} RTT), PING x5 ${row.pingP50.toFixed(3)} ms, client CPU ${row.clientCpuUs.toFixed(0)} µs/cycle, ${row.commandsPerCycle.toFixed(1)} commands/cycle, Redis ${row.redisUs.toFixed(0)} µs/cycle`,
        );
      }
      for (const id of ids) {
        const row = await contendedRound(ctx, workers, admins, id, round);
        contended.get(id)!.push(row);
        ctx.log(
          `  redlock contended r${round + 1} ${id.padEnd(15)} ${row.perSecond.toFixed(0)} acq/s, wait p50 ${row.waitP50.toFixed(1)} ms p99 ${row.waitP99.toFixed(1)} ms, Jain ${row.jain.toFixed(3)}, ${row.commandsPerAcq.toFixed(2)} commands/acq (incl. Lua ${row.executedPerAcq.toFixed(1)}), worker CPU ${row.clientCpuPerAcqMs.toFixed(2)} ms/acq, Redis ${row.redisUsPerAcq.toFixed(0)} µs/acq, lost updates ${row.lostUpdates}, give-ups ${row.giveUps}`,
        );
      }
    }
  } finally {
    await closeWorkers(workers);
    live.workers = [];
    await Promise.all(subjects.map((s) => s.close().catch(() => undefined)));
    for (const r of [...admins, ...connections.flat()]) r.disconnect();
    await stopTopology(topology);
    live.topology = undefined;
  }
  return {
    masters: ports.length,
    processes,
    sectionMs: ctx.config.redLockSectionMs,
    warmupMs: ctx.config.redLockWarmupMs,
    windowMs: ctx.config.redLockWindowMs,
    iterations: n,
    rounds,
    rttMs: median(pings),
    uncontended: Object.fromEntries(ids.map((id) => [id, summarize(uncontended.get(id)!)])),
    contended: Object.fromEntries(ids.map((id) => [id, summarize(contended.get(id)!, ['lostUpdates'])])),
  };
}
