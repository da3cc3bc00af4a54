import type Redis from 'ioredis';
import { CONTENDER_IDS, type ContenderId } from './contenders';
import type { WorkerPool } from './worker-pool';

/** Sizes and durations of one run; `--quick` shrinks them to about 3 minutes in all. */
export interface BenchConfig {
  quick: boolean;
  /** Which locks to measure (all by default; `--contenders=` narrows it for experiments). */
  contenders: ContenderId[];
  /** Every contender is measured once per round, in turn (A B C ... then again); tables show medians. */
  rounds: number;
  /** Our locks' `turnTime` (`--turn-time=`); undefined: the library's default. */
  turnTime?: number;
  uncontendedIterations: number;
  parallelKeys: number;
  parallelMs: number;
  hotProcesses: number;
  hotWarmupMs: number;
  hotWindowMs: number;
  /** Before the hot-key rounds each contender warms up until every process made this many acquisitions (on average)… */
  warmupGrantsPerProcess: number;
  /** …or this many 1 s windows ran. */
  warmupMaxWindows: number;
  /** The hot key again with a critical section that sleeps this long between its read and its write (`hot1ms`). */
  hot1msSectionMs: number;
  /** Its warm-up, the same way but shorter: each grant there takes at least `hot1msSectionMs`. */
  hot1msWarmupGrantsPerProcess: number;
  hot1msWarmupMaxWindows: number;
  waiterCounts: number[];
  waitersRounds: number;
  waitersWarmupMs: (waiters: number) => number;
  waitersWindowMs: number;
  watchdogLocks: number;
  watchdogTicks: number;
  /** Distinct names each contender locks and releases once in the many-names scenario (`--names=`). */
  names: number;
  /** How many of those names are locked at a time. */
  namesInFlight: number;
  /** RedLock scenario (five masters): uncontended acquire + release cycles per contender and round. */
  redLockIterations: number;
  /** Its contended part: every process loops on one name; warm-up, then the window counted. */
  redLockWarmupMs: number;
  redLockWindowMs: number;
  /** The contended critical section sleeps this long between its GET and its SET. */
  redLockSectionMs: number;
}

export function benchConfig(
  quick: boolean,
  rounds?: number,
  contenders: ContenderId[] = [...CONTENDER_IDS],
  turnTime?: number,
  names?: number,
): BenchConfig {
  const warmupGrantsPerProcess = quick ? 2_000 : 5_000;
  const warmupMaxWindows = quick ? 20 : 60;
  return {
    quick,
    contenders,
    rounds: rounds ?? (quick ? 1 : 3),
    turnTime,
    uncontendedIterations: quick ? 400 : 2_000,
    parallelKeys: 200,
    parallelMs: quick ? 500 : 1_500,
    hotProcesses: 8,
    hotWarmupMs: quick ? 300 : 500,
    hotWindowMs: quick ? 1_200 : 2_500,
    warmupGrantsPerProcess,
    warmupMaxWindows,
    hot1msSectionMs: 1,
    // A quarter of the grants and windows: 500 / 1,250 grants per process, at most 5 / 15 windows.
    hot1msWarmupGrantsPerProcess: warmupGrantsPerProcess / 4,
    hot1msWarmupMaxWindows: Math.ceil(warmupMaxWindows / 4),
    waiterCounts: [1, 10, 100, 1000],
    waitersRounds: rounds ?? (quick ? 1 : 2),
    waitersWarmupMs: (waiters) => (waiters >= 1000 ? (quick ? 600 : 1_000) : waiters >= 100 ? 400 : 250),
    waitersWindowMs: quick ? 400 : 1_200,
    watchdogLocks: 10_000,
    watchdogTicks: quick ? 3 : 10,
    names: names ?? (quick ? 100_000 : 1_000_000),
    namesInFlight: 256,
    redLockIterations: quick ? 300 : 1_500,
    redLockWarmupMs: quick ? 1_000 : 2_000,
    redLockWindowMs: quick ? 2_000 : 5_000,
    redLockSectionMs: 1,
  };
}

export interface BenchContext {
  config: BenchConfig;
  port: number;
  /** A separate connection for INFO / CONFIG RESETSTAT / checks. */
  admin: Redis;
  pool: WorkerPool;
  /** Unique per run, so keys never collide with a previous (crashed) run. */
  tag: string;
  /** Whether redis-server and the bench were pinned to CPUs apart (see pinning.ts): the RedLock masters join redis-server's. */
  pinned?: boolean;
  log: (line: string) => void;
}
