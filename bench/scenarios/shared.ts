/**
 * Several holders at once, 8 processes with one loop each on one name, a 1 ms section: our
 * semaphore against redis-semaphore's (both 5 permits), and our read lock against our reentrant
 * lock (the exclusive reference: what readers gain by sharing). Each section counts the holders
 * inside (INCR / DECR) and checks them against the limit.
 */
import type { BenchContext } from '../lib/context';
import { contendersFor, SHARED_LIMIT, type ContenderId } from '../lib/contenders';
import { measureContended, spread, summariseRounds, warmUp, type ContendedMeasurement } from '../lib/contended';
import type { SharedSection } from '../lib/protocol';

export interface SharedRow extends Omit<ContendedMeasurement, 'executedByCommand'> {
  /** Holders allowed at once: the permits, 1 for the exclusive lock, none (all) for the read lock. */
  limit?: number;
}

export interface SharedResult {
  rows: Partial<Record<ContenderId, SharedRow>>;
  processes: number;
  windowMs: number;
  sectionMs: number;
}

const SECTION_MS = 1;

function sectionOf(id: ContenderId): SharedSection {
  if (id === 'permits' || id === 'rs-semaphore' || id === 'permit-floor') return { limit: SHARED_LIMIT };
  if (id === 'read') return {};
  return { limit: 1 };
}

export async function runShared(ctx: BenchContext): Promise<SharedResult> {
  const { hotProcesses, hotWarmupMs, hotWindowMs, rounds } = ctx.config;
  const ids = contendersFor(ctx.config.contenders, 'shared');
  const loops = spread(hotProcesses, hotProcesses);
  for (const id of ids) {
    const rates = await warmUp(
      ctx,
      id,
      `${ctx.tag}:warm-shared:${id}`,
      loops,
      250 * hotProcesses,
      8,
      SECTION_MS,
      sectionOf(id),
    );
    ctx.log(`  warm-up ${id.padEnd(13)} ${rates.join(' -> ')} acq/s`);
  }
  const perRound = new Map<ContenderId, ContendedMeasurement[]>(ids.map((id) => [id, []]));
  for (let round = 0; round < rounds; round++) {
    for (const id of ids) {
      const key = `${ctx.tag}:shared:${id}:${round}`;
      const m = await measureContended(ctx, id, key, loops, hotWarmupMs, hotWindowMs, SECTION_MS, sectionOf(id));
      perRound.get(id)!.push(m);
      ctx.log(
        `  shared r${round + 1} ${id.padEnd(13)} ${Math.round(m.perSecond)}/s, wait p50 ${m.waitP50.toFixed(1)} ms p99 ${m.waitP99.toFixed(1)} ms, max inside ${m.maxInside}, over the limit ${m.lostUpdates}, cmds/acq ${m.commandsPerAcq.toFixed(2)}, give-ups ${m.giveUps}, CPU/acq client ${m.clientCpuPerAcqMs.toFixed(3)} ms`,
      );
    }
  }
  const rows = Object.fromEntries(
    ids.map((id) => {
      const all = perRound.get(id)!;
      const row: SharedRow = {
        ...summariseRounds(all),
        maxInside: Math.max(...all.map((m) => m.maxInside)),
        limit: sectionOf(id).limit,
      };
      return [id, row];
    }),
  ) as Partial<Record<ContenderId, SharedRow>>;
  return { rows, processes: hotProcesses, windowMs: hotWindowMs, sectionMs: SECTION_MS };
}
