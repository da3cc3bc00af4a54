/**
 * `npm run bench [-- --quick] [-- --no-pin] [-- --rounds=N] [-- --only=uncontended,parallel,hot,hot1ms,shared,waiters,watchdog,startup,failover,redlock,names]`
 *   `[-- --turn-time=MS]` (our locks' LockClient `turnTime`, to measure the trade-off; such a run goes to bench/out/)
 *   `[-- --names=N]` (the many-names scenario's names, default 1,000,000; it runs only when `--only` names it)
 *   `--merge=bench/out/results.json` (no run: puts that run's many-names result into docs/benchmarks.json and
 *   re-renders docs/benchmarks.md)
 *
 * Starts its own redis-server through the topology harness ('single' on port 7300, inside the
 * private 7200-7399 range of scripts/redis-topology.ts; the failover scenario adds sentinel topologies on
 * 7360 and 7370, the RedLock scenario five masters on 7350-7354), pins it apart from the clients where it can,
 * runs every scenario with every contender interleaved round by round, and writes
 * docs/benchmarks.md + docs/benchmarks.svg (a --quick run writes to bench/out/ instead, so it never
 * replaces the published report). Redis and the worker processes are stopped at the end and on
 * Ctrl-C, each by its own pid.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { startTopology, stopTopology, terminateTopologySync, type RunningTopology } from '../scripts/redis-topology';
import { benchConfig, type BenchContext } from './lib/context';
import { CONTENDER_IDS, TURN_TIME_ENV, type ContenderId } from './lib/contenders';
import { pinApart, type Pinning } from './lib/pinning';
import { killAllWorkers, WorkerPool } from './lib/worker-pool';
import { formatLikeRepo } from './report/format';
import { machineInfo } from './report/machine';
import { writeReport, type BenchResults } from './report/markdown';
import { mergeManyNames } from './report/merge';
import { runHotKey, runHotKey1ms } from './scenarios/hot-key';
import { runManyWaiters } from './scenarios/many-waiters';
import { runParallel } from './scenarios/parallel';
import { runUncontended } from './scenarios/uncontended';
import { runStartup } from './scenarios/startup';
import { runWatchdog } from './scenarios/watchdog';
import { runFailover, stopFailoverSync } from './scenarios/failover';
import { runShared } from './scenarios/shared';
import { runManyNames } from './scenarios/many-names';
import { runRedLock, stopRedLockSync } from './scenarios/red-lock';
import { PRIVATE_PORTS } from '../scripts/test-ports';

const BASE_PORT = PRIVATE_PORTS.bench.base;
const SCENARIOS = [
  'uncontended',
  'parallel',
  'hot',
  'hot1ms',
  'shared',
  'waiters',
  'watchdog',
  'startup',
  'failover',
  'redlock',
  'names',
] as const;
type Scenario = (typeof SCENARIOS)[number];
/** What a run without `--only` measures: many names (about half an hour at 1,000,000 names) is run by itself. */
const DEFAULT_SCENARIOS: readonly Scenario[] = SCENARIOS.filter((s) => s !== 'names');

interface Args {
  quick: boolean;
  /** Leave CPU placement to the OS (to see what pinning changes). */
  noPin: boolean;
  /** Only re-render the report from a results.json of an earlier run. */
  from?: string;
  /** Only merge the many-names result of this results.json into docs/benchmarks.json, and re-render. */
  merge?: string;
  /** Names of the many-names scenario. */
  names?: number;
  contenders?: ContenderId[];
  rounds?: number;
  /** Our locks' `turnTime` instead of the default (see bench/lib/contenders.ts). */
  turnTime?: number;
  only: Set<Scenario>;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { quick: false, noPin: false, only: new Set(DEFAULT_SCENARIOS) };
  for (const arg of argv) {
    if (arg === '--quick') args.quick = true;
    else if (arg === '--no-pin') args.noPin = true;
    else if (arg.startsWith('--from=')) args.from = arg.slice('--from='.length);
    else if (arg.startsWith('--merge=')) args.merge = arg.slice('--merge='.length);
    else if (arg.startsWith('--rounds=')) args.rounds = Number(arg.slice('--rounds='.length));
    else if (arg.startsWith('--names=')) args.names = Number(arg.slice('--names='.length));
    else if (arg.startsWith('--turn-time=')) args.turnTime = Number(arg.slice('--turn-time='.length));
    else if (arg.startsWith('--only=')) {
      const names = arg.slice('--only='.length).split(',');
      for (const n of names)
        if (!SCENARIOS.includes(n as Scenario))
          throw new Error(`unknown scenario ${n}; one of ${SCENARIOS.join(', ')}`);
      args.only = new Set(names as Scenario[]);
    } else if (arg.startsWith('--contenders=')) {
      const ids = arg.slice('--contenders='.length).split(',');
      for (const id of ids)
        if (!CONTENDER_IDS.includes(id as ContenderId))
          throw new Error(`unknown contender ${id}; one of ${CONTENDER_IDS.join(', ')}`);
      args.contenders = ids as ContenderId[];
    } else if (arg === '--help' || arg === '-h') {
      console.log(
        `npm run bench [-- --quick] [--no-pin] [--rounds=N] [--only=${SCENARIOS.join(',')}] [--contenders=${CONTENDER_IDS.join(',')}]\n` +
          "              [--turn-time=MS]   (our locks' turnTime; the run goes to bench/out/)\n" +
          '              [--names=N]   (names of --only=names, default 1,000,000; not run without --only)\n' +
          '              [--from=bench/out/results.json]   (re-render the report only)\n' +
          '              [--merge=bench/out/results.json]   (its many-names result into docs/benchmarks.json, and re-render)',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${arg} (try --help)`);
  }
  if (args.rounds !== undefined && !(Number.isInteger(args.rounds) && args.rounds > 0))
    throw new Error('--rounds must be a positive integer');
  if (args.names !== undefined && !(Number.isInteger(args.names) && args.names > 0))
    throw new Error('--names must be a positive integer');
  if (args.turnTime !== undefined && !(Number.isInteger(args.turnTime) && args.turnTime >= 0))
    throw new Error('--turn-time must be a whole number of ms (0: pass the lock on at every release)');
  return args;
}

const log = (line: string): void => console.log(line);

const OUT_DIR = path.join(__dirname, 'out');
const DOCS_DIR = path.join(__dirname, '..', 'docs');

const PUBLISHED = path.join(DOCS_DIR, 'benchmarks.json');
const readResults = (file: string): BenchResults => JSON.parse(fs.readFileSync(file, 'utf8')) as BenchResults;

async function report(results: BenchResults): Promise<void> {
  const written = await writeReport(results, results.complete ? DOCS_DIR : OUT_DIR);
  if (results.complete) {
    // The published report's raw numbers, next to it.
    fs.writeFileSync(PUBLISHED, await formatLikeRepo(JSON.stringify(results, null, 2) + '\n', PUBLISHED));
    written.push(PUBLISHED);
  }
  log(`wrote ${written.map((f) => path.relative(process.cwd(), f)).join(', ')}`);
}

/**
 * The published report with the many-names result of `file` (a run of `--only=names`) in place of its
 * own: nothing is measured, docs/benchmarks.json and docs/benchmarks.md are rewritten.
 */
async function merge(file: string): Promise<void> {
  const from = readResults(file);
  if (from.names && from.names.names !== benchConfig(false).names)
    log(`note: ${from.names.names.toLocaleString('en-US')} names, not the default; the report says so`);
  await report(mergeManyNames(readResults(PUBLISHED), from));
}

/** What has to be cleaned up, for the exit and signal handlers. */
const run: { topology?: RunningTopology; stopped: boolean; interrupted: boolean } = {
  stopped: false,
  interrupted: false,
};

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.from) return report(readResults(args.from));
  if (args.merge) return merge(args.merge);
  const config = benchConfig(args.quick, args.rounds, args.contenders, args.turnTime, args.names);
  // Read by our contenders, here and in the worker processes, which inherit the environment.
  if (config.turnTime !== undefined) process.env[TURN_TIME_ENV] = String(config.turnTime);
  const started = Date.now();
  const starting = new AbortController();
  const stopSync = (): void => {
    killAllWorkers();
    stopFailoverSync();
    stopRedLockSync();
    if (run.topology && !run.stopped) terminateTopologySync(run.topology);
    run.stopped = true;
  };
  process.on('exit', stopSync);
  const onSignal = (signal: NodeJS.Signals): void => {
    if (run.interrupted) {
      // Second Ctrl-C: signal everything now, do not wait.
      stopSync();
      process.exit(130);
    }
    run.interrupted = true;
    log(`\n${signal}: stopping workers and redis-server ...`);
    killAllWorkers();
    stopFailoverSync();
    stopRedLockSync();
    const t = run.topology;
    if (!t) {
      starting.abort(new Error(`interrupted by ${signal}`)); // startTopology stops what it started, then rejects
      return;
    }
    stopTopology(t)
      .catch(() => terminateTopologySync(t))
      .finally(() => {
        run.stopped = true;
        process.exit(130);
      });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const topology = await startTopology('single', {
    basePort: BASE_PORT,
    name: `bench-${BASE_PORT}`,
    log,
    signal: starting.signal,
  });
  run.topology = topology;
  const port = topology.masters[0].port;
  const pinning: Pinning = args.noPin
    ? { applied: false, description: 'not pinned (--no-pin)' }
    : pinApart(topology.nodes[0].pid);
  log(`pinning: ${pinning.description}`);
  const admin = new Redis({ port, host: '127.0.0.1' });
  let pool: WorkerPool | undefined;
  try {
    const needPool =
      args.only.has('hot') || args.only.has('hot1ms') || args.only.has('shared') || args.only.has('waiters');
    pool = needPool ? await WorkerPool.start(config.hotProcesses, port) : undefined;
    const ctx: BenchContext = {
      config,
      port,
      admin,
      pool: pool as WorkerPool,
      tag: `b${Date.now().toString(36)}`,
      log,
      pinned: pinning.applied,
    };
    const results: BenchResults = { config, pinning, machine: await machineInfo(admin), workerPids: pool?.pids ?? [] };
    /** Runs one scenario if it was asked for, in the order below, and keeps its result. */
    const measure = async <K extends keyof BenchResults>(
      scenario: Scenario,
      what: string,
      key: K,
      run: (ctx: BenchContext) => Promise<BenchResults[K]>,
    ): Promise<void> => {
      if (!args.only.has(scenario)) return;
      log(`${what} ...`);
      results[key] = await run(ctx);
    };
    const processes = `${config.hotProcesses} processes`;
    await measure('uncontended', 'uncontended latency', 'uncontended', runUncontended);
    await measure('parallel', 'parallel capacity', 'parallel', runParallel);
    await measure('hot', `hot key, ${processes}`, 'hotKey', runHotKey);
    await measure(
      'hot1ms',
      `hot key, ${config.hot1msSectionMs} ms critical section, ${processes}`,
      'hotKey1ms',
      runHotKey1ms,
    );
    await measure('shared', `several holders at once (semaphore, read lock), ${processes}`, 'shared', runShared);
    await measure('waiters', 'many waiters', 'waiters', runManyWaiters);
    await measure('watchdog', `watchdog, ${config.watchdogLocks} held locks`, 'watchdog', runWatchdog);
    await measure('startup', 'start-up race', 'startup', runStartup);
    await measure('failover', 'failover (sentinel master killed / paused)', 'failover', runFailover);
    await measure('redlock', `RedLock on 5 masters, uncontended and ${processes} on one name`, 'redLock', runRedLock);
    await measure('names', `many names (${config.names} names, each locked once)`, 'names', runManyNames);
    results.durationS = (Date.now() - started) / 1000;
    results.machine.loadEnd = os.loadavg()[0];
    // Only a full run at the default sizes replaces docs/benchmarks.md; anything else goes to bench/out/.
    results.complete =
      !args.quick &&
      DEFAULT_SCENARIOS.every((s) => args.only.has(s)) &&
      args.rounds === undefined &&
      args.contenders === undefined &&
      args.names === undefined &&
      config.turnTime === undefined;
    fs.mkdirSync(OUT_DIR, { recursive: true });
    const resultsFile = path.join(OUT_DIR, 'results.json');
    fs.writeFileSync(resultsFile, await formatLikeRepo(JSON.stringify(results, null, 2) + '\n', resultsFile));
    log(`measured in ${results.durationS.toFixed(0)} s`);
    // A full run without many names keeps the published many-names result (it is run by itself).
    const published =
      results.complete && !results.names && fs.existsSync(PUBLISHED) ? readResults(PUBLISHED) : undefined;
    await report(published?.names ? mergeManyNames(results, published) : results);
  } finally {
    await pool?.close();
    admin.disconnect();
    if (!run.interrupted) {
      await stopTopology(topology);
      run.stopped = true;
    }
  }
}

main().catch((error: Error) => {
  if (run.interrupted) {
    process.exitCode = 130; // the signal handler is stopping redis-server; what failed meanwhile is expected
    return;
  }
  console.error(error.stack ?? error.message);
  process.exitCode = 1;
});
