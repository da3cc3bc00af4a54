/**
 * Many waiters on one key: 1, 10, 100 and 1000 waiters (plus the holder), spread over up to 8
 * processes. What matters is the Redis work per acquisition: a release must not wake every waiter.
 */
import type { BenchContext } from '../lib/context';
import { measureContended, spread, summariseRounds, topCommands, type ContendedMeasurement } from '../lib/contended';
import { contendersFor, type ContenderId } from '../lib/contenders';

export type WaitersRow = Omit<ContendedMeasurement, 'executedByCommand'> & {
  executedByCommand: Record<string, number>;
};

export interface WaitersResult {
  /** waiters -> contender -> medians over rounds */
  levels: { waiters: number; processes: number; rows: Partial<Record<ContenderId, WaitersRow>> }[];
  windowMs: number;
}

export async function runManyWaiters(ctx: BenchContext): Promise<WaitersResult> {
  const { waiterCounts, waitersRounds, waitersWarmupMs, waitersWindowMs, hotProcesses } = ctx.config;
  const levels: WaitersResult['levels'] = [];
  const contenders = contendersFor(ctx.config.contenders, 'locks');
  for (const waiters of waiterCounts) {
    const loops = spread(waiters + 1, hotProcesses);
    const perRound = new Map<ContenderId, ContendedMeasurement[]>(contenders.map((id) => [id, []]));
    for (let round = 0; round < waitersRounds; round++) {
      for (const id of contenders) {
        const key = `${ctx.tag}:w${waiters}:${id}:${round}`;
        const m = await measureContended(ctx, id, key, loops, waitersWarmupMs(waiters), waitersWindowMs);
        perRound.get(id)!.push(m);
        ctx.log(
          `  ${String(waiters).padStart(4)} waiters r${round + 1} ${id.padEnd(13)} ${Math.round(m.perSecond)}/s, ${m.commandsPerAcq.toFixed(2)} cmds/acq (sent ${m.sentPerAcq.toFixed(2)}, incl. Lua ${m.executedPerAcq.toFixed(1)}), wait p99 ${m.waitP99.toFixed(0)} ms, hand-off p50 ${m.handoffP50.toFixed(2)} ms, lost ${m.lostUpdates}, give-ups ${m.giveUps}, CPU/acq client ${m.clientCpuPerAcqMs.toFixed(3)} redis ${m.redisCpuPerAcqMs.toFixed(3)} ms ${topCommands(m)}`,
        );
      }
    }
    const rows = Object.fromEntries(
      contenders.map((id) => {
        const all = perRound.get(id)!;
        const row: WaitersRow = {
          ...summariseRounds(all),
          executedByCommand: all[all.length - 1].executedByCommand,
        };
        return [id, row];
      }),
    ) as Partial<Record<ContenderId, WaitersRow>>;
    levels.push({ waiters, processes: loops.length, rows });
  }
  return { levels, windowMs: waitersWindowMs };
}
