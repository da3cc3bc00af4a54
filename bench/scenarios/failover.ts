/**
 * Failover (issue #13): 8 OS processes (bench/failover-worker.ts) contend for one key of a sentinel
 * deployment (1 master, 3 replicas, 3 sentinels, down-after 1 s), each critical section a racy
 * read-modify-write of a counter on the bench's own Redis (never faulted, so every lost update is an
 * overlap of two holders). Once they have made 100 acquisitions the master is SIGKILLed, or SIGSTOPped
 * for 4 s. Per contender: the failover time (fault -> a sentinel names another master), the outage
 * (the longest time without a grant from the fault on), double grants (critical sections that found
 * another holder inside) and lost updates. One private topology per fault (ports 7360 and 7370),
 * healed between contenders; the measuring code is the fault suite's (test/faults/support.ts).
 */
import * as path from 'node:path';
import {
  signalNode,
  startTopology,
  stopTopology,
  terminateTopologySync,
  type RunningTopology,
} from '../../scripts/redis-topology';
import {
  analyse,
  counterReaches,
  epochNow,
  healSentinel,
  PAUSE_MS,
  Race,
  sentinelMaster,
  sentinelSwitched,
  sleep,
} from '../../test/faults/support';
import { killAll, type Worker } from '../../test/support/workers';
import type { BenchContext } from '../lib/context';
import type { ContenderId } from '../lib/contenders';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

export const FAILOVER_FAULTS = {
  kill: PRIVATE_PORTS.benchFailoverKill.base,
  pause: PRIVATE_PORTS.benchFailoverPause.base,
} as const;
export type FailoverFault = keyof typeof FAILOVER_FAULTS;
/** Ours and the peers a user would pick over a sentinel master (redlock over that one master). */
const FAILOVER_CONTENDERS: ContenderId[] = ['reentrant', 'fair', 'raw', 'semaphore', 'redlock'];
const PROCESSES = 8;
const WORKER = path.join(__dirname, '..', 'failover-worker.ts');

export interface FailoverRow {
  failoverMs: number;
  outageMs: number;
  doubleGrants: number;
  lostUpdates: number;
  sections: number;
  errors: Record<string, number>;
}

export interface FailoverResult {
  processes: number;
  pauseMs: number;
  rows: Record<FailoverFault, Partial<Record<ContenderId, FailoverRow>>>;
}

/** Started here and not yet stopped: for bench/run.ts's exit and signal handlers. */
const live = { workers: [] as Worker[], topologies: new Set<RunningTopology>() };

export function stopFailoverSync(): void {
  killAll(live.workers);
  for (const t of live.topologies) terminateTopologySync(t);
}

async function measure(
  ctx: BenchContext,
  t: RunningTopology,
  fault: FailoverFault,
  contender: ContenderId,
): Promise<FailoverRow> {
  const counterKey = `${ctx.tag}:failover:${fault}:${contender}`;
  const race = await Race.start(
    PROCESSES,
    {
      CONTENDER: contender,
      SENTINELS: JSON.stringify(t.sentinels),
      MASTER_NAME: t.sentinelMasterName!,
      LOCK_KEY: `${ctx.tag}:failover:${fault}`,
      COUNTER_PORT: ctx.port,
      COUNTER_KEY: counterKey,
    },
    live.workers,
    () => ({}),
    WORKER,
  );
  try {
    if (!(await counterReaches(ctx.admin, counterKey, 100, 30_000))) throw new Error(`${contender}: no progress`);
    const master = await sentinelMaster(t);
    const faultAt = epochNow();
    const switched = sentinelSwitched(t, master.port, 30_000);
    switched.catch(() => undefined);
    let failoverAt: number;
    if (fault === 'kill') {
      await signalNode(t, master.port, 'SIGKILL');
      failoverAt = await switched;
    } else {
      await signalNode(t, master.port, 'SIGSTOP');
      try {
        const early = await Promise.race([switched, sleep(PAUSE_MS).then(() => undefined)]);
        await sleep(Math.max(0, faultAt + PAUSE_MS - epochNow()));
        failoverAt = early ?? epochNow();
      } finally {
        await signalNode(t, master.port, 'SIGCONT');
      }
    }
    // Until the key has clearly changed hands again (a lease left behind lasts up to 30 s), then 1 s more.
    const atFault = Number(await ctx.admin.get(counterKey));
    await counterReaches(ctx.admin, counterKey, atFault + 50, 40_000);
    await sleep(1_000);
    const results = await race.stop();
    const report = analyse(results, Number(await ctx.admin.get(counterKey)), faultAt);
    await healSentinel(t, master.port, fault === 'kill');
    return {
      failoverMs: failoverAt - faultAt,
      outageMs: report.outageMs,
      doubleGrants: report.doubleGrants,
      lostUpdates: report.lostUpdates,
      sections: report.sections,
      errors: report.errors,
    };
  } finally {
    killAll(race.workers);
  }
}

export async function runFailover(ctx: BenchContext): Promise<FailoverResult> {
  const contenders = FAILOVER_CONTENDERS.filter((id) => ctx.config.contenders.includes(id));
  const rows: FailoverResult['rows'] = { kill: {}, pause: {} };
  for (const fault of Object.keys(FAILOVER_FAULTS) as FailoverFault[]) {
    const t = await startTopology('sentinel', { basePort: FAILOVER_FAULTS[fault], name: `bench-failover-${fault}` });
    live.topologies.add(t);
    try {
      for (const id of contenders) {
        const row = await measure(ctx, t, fault, id);
        rows[fault][id] = row;
        ctx.log(
          `  failover (${fault}) ${id.padEnd(10)} failover ${Math.round(row.failoverMs)} ms, outage ${Math.round(row.outageMs)} ms, ` +
            `double grants ${row.doubleGrants}, lost updates ${row.lostUpdates}, ${row.sections} acquisitions, errors ${JSON.stringify(row.errors)}`,
        );
      }
    } finally {
      await stopTopology(t);
      live.topologies.delete(t);
    }
  }
  return { processes: PROCESSES, pauseMs: PAUSE_MS, rows };
}
