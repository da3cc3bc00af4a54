/**
 * One hot key, 8 OS processes with one lock loop each, no pause between acquisitions: throughput,
 * hand-off latency (previous holder's release -> next grant, timestamps taken inside the critical
 * sections), waits, fairness over processes, lost updates and Redis commands per acquisition.
 * `runHotKey1ms` is the same with a critical section that sleeps 1 ms between its read and its write.
 */
import type { BenchContext } from '../lib/context';
import {
  measureContended,
  spread,
  summariseRounds,
  topCommands,
  warmUp,
  type ContendedMeasurement,
} from '../lib/contended';
import { contendersFor, type ContenderId } from '../lib/contenders';
import { median } from '../lib/stats';

export type HotKeyRow = Omit<ContendedMeasurement, 'executedByCommand'> & { rounds: ContendedMeasurement[] };

export interface HotKeyResult {
  rows: Partial<Record<ContenderId, HotKeyRow>>;
  /** Throughput (acq/s) of each 1 s warm-up window, before any measurement. */
  warmup?: Partial<Record<ContenderId, number[]>>;
  processes: number;
  windowMs: number;
  /** Sleep inside each critical section, between its read and its write (absent in results of older runs: 0). */
  sectionMs?: number;
}

interface HotKeyOptions {
  /** Key and log-line name of the scenario. */
  name: string;
  sectionMs: number;
  warmupGrantsPerProcess: number;
  warmupMaxWindows: number;
}

export function runHotKey(ctx: BenchContext): Promise<HotKeyResult> {
  return hotKey(ctx, {
    name: 'hot',
    sectionMs: 0,
    warmupGrantsPerProcess: ctx.config.warmupGrantsPerProcess,
    warmupMaxWindows: ctx.config.warmupMaxWindows,
  });
}

/** The same with a 1 ms critical section (MGET, 1 ms sleep, MSET), and a shorter warm-up. */
export function runHotKey1ms(ctx: BenchContext): Promise<HotKeyResult> {
  return hotKey(ctx, {
    name: 'hot1ms',
    sectionMs: ctx.config.hot1msSectionMs,
    warmupGrantsPerProcess: ctx.config.hot1msWarmupGrantsPerProcess,
    warmupMaxWindows: ctx.config.hot1msWarmupMaxWindows,
  });
}

async function hotKey(ctx: BenchContext, options: HotKeyOptions): Promise<HotKeyResult> {
  const { hotProcesses, hotWarmupMs, hotWindowMs, rounds } = ctx.config;
  const { name, sectionMs } = options;
  const ids = contendersFor(ctx.config.contenders, 'hot');
  const perRound = new Map<ContenderId, ContendedMeasurement[]>(ids.map((id) => [id, []]));
  const warmup: Partial<Record<ContenderId, number[]>> = {};
  for (const id of ids) {
    warmup[id] = await warmUp(
      ctx,
      id,
      `${ctx.tag}:warm-${name}:${id}`,
      spread(hotProcesses, hotProcesses),
      options.warmupGrantsPerProcess * hotProcesses,
      options.warmupMaxWindows,
      sectionMs,
    );
    ctx.log(`  warm-up ${id.padEnd(13)} ${warmup[id].join(' -> ')} acq/s`);
  }
  for (let round = 0; round < rounds; round++) {
    for (const id of ids) {
      const m = await measureContended(
        ctx,
        id,
        `${ctx.tag}:${name}:${id}:${round}`,
        spread(hotProcesses, hotProcesses),
        hotWarmupMs,
        hotWindowMs,
        sectionMs,
      );
      perRound.get(id)!.push(m);
      ctx.log(
        `  ${name === 'hot' ? 'hot key' : name} r${round + 1} ${id.padEnd(13)} ${Math.round(m.perSecond)}/s, hand-off p50 ${m.handoffP50.toFixed(2)} ms (to another process ${(m.crossProcessShare * 100).toFixed(0)}%, p50 ${m.crossHandoffP50.toFixed(2)} ms), wait p99 ${m.waitP99.toFixed(1)} ms max ${m.waitMax.toFixed(0)} ms, Jain ${m.jain.toFixed(3)}, lost ${m.lostUpdates}, cmds/acq ${m.commandsPerAcq.toFixed(2)} (sent ${m.sentPerAcq.toFixed(2)}, incl. Lua ${m.executedPerAcq.toFixed(1)}), give-ups ${m.giveUps}, CPU/acq client ${m.clientCpuPerAcqMs.toFixed(3)} redis ${m.redisCpuPerAcqMs.toFixed(3)} ms ${topCommands(m)}`,
      );
    }
  }
  const rows = Object.fromEntries(
    ids.map((id) => {
      const all = perRound.get(id)!;
      const row: HotKeyRow = {
        ...summariseRounds(all),
        // The worst case is not averaged away either: the worst round counts.
        waitMax: Math.max(...all.map((m) => m.waitMax)),
        giveUps: median(all.map((m) => m.giveUps)),
        rounds: all,
      };
      return [id, row];
    }),
  ) as Partial<Record<ContenderId, HotKeyRow>>;
  return {
    rows,
    warmup,
    processes: hotProcesses,
    windowMs: hotWindowMs,
    sectionMs,
  };
}
