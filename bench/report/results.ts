import type { BenchConfig } from '../lib/context';
import type { Pinning } from '../lib/pinning';
import type { HotKeyResult } from '../scenarios/hot-key';
import type { WaitersResult } from '../scenarios/many-waiters';
import type { ParallelResult } from '../scenarios/parallel';
import type { StartupResult } from '../scenarios/startup';
import type { UncontendedResult } from '../scenarios/uncontended';
import type { WatchdogResult } from '../scenarios/watchdog';
import type { FailoverResult } from '../scenarios/failover';
import type { SharedResult } from '../scenarios/shared';
import type { ManyNamesResult } from '../scenarios/many-names';
import type { RedLockResult } from '../scenarios/red-lock';
import type { MachineInfo } from './machine';

export interface BenchResults {
  config: BenchConfig;
  /** Every scenario and contender at the default sizes (what docs/benchmarks.md is made from). */
  complete?: boolean;
  pinning: Pinning;
  machine: MachineInfo;
  workerPids: number[];
  uncontended?: UncontendedResult;
  parallel?: ParallelResult;
  hotKey?: HotKeyResult;
  /** The hot key with a 1 ms critical section (`--only=hot1ms`). */
  hotKey1ms?: HotKeyResult;
  shared?: SharedResult;
  waiters?: WaitersResult;
  watchdog?: WatchdogResult;
  startup?: StartupResult;
  failover?: FailoverResult;
  /** RedLock on five masters, ours against @sesamecare-oss/redlock (`--only=redlock`). */
  redLock?: RedLockResult;
  /** Many names, once each (`--only=names`; maybe from a run of its own, see bench/report/merge.ts). */
  names?: ManyNamesResult;
  durationS?: number;
}

// Formatting
