/**
 * Many names, once each: `names` distinct names (`order:<n>`), each locked and released once,
 * `namesInFlight` at a time, by every kind of ours and the peers that take a name per lock
 * (MANY_NAMES), one contender after another, each on a Redis emptied for it (FLUSHALL of the bench's
 * own server). What the names leave behind is sampled (bench/lib/keyspace.ts) before the run, right
 * after its last release, once every lease has run out, and after the idle period: past our clients'
 * `idleKeyTtl` (set short here) and the time ended hold records are kept.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import Redis from 'ioredis';
import { sleep } from '../../scripts/tooling';
import { nowMs } from '../lib/clock';
import type { BenchContext } from '../lib/context';
import { contendersFor, createContender, type Contender, type ContenderId } from '../lib/contenders';
import { sampleKeyspace, type KeyspaceSample } from '../lib/keyspace';

export const NAMES_POINTS = ['before', 'run', 'lease', 'idle'] as const;
export type NamesPoint = (typeof NAMES_POINTS)[number];

export interface NamesSample extends KeyspaceSample {
  /** When the sample started, in ms after the run's last release (negative: before the run). */
  atMs: number;
}

export interface ManyNamesRow {
  runMs: number;
  /** Names locked and released per second. */
  perSecond: number;
  giveUps: number;
  samples: Record<NamesPoint, NamesSample>;
}

export interface ManyNamesResult {
  rows: Partial<Record<ContenderId, ManyNamesRow>>;
  names: number;
  inFlight: number;
  /** The longest lease of the contenders; the `lease` sample comes `leaseAtMs` after the last release. */
  leaseMs: number;
  leaseAtMs: number;
  /** Our clients' idleKeyTtl here, and how long an ended hold's record is kept (lua/include/hold-ids.lua). */
  idleKeyTtlMs: number;
  recordMemoryMs: number;
  idleAtMs: number;
  /** When this scenario ran and how long it took (it may be merged into the report of another run). */
  date: string;
  durationS: number;
  /** Set when the result was merged into the report of another run: the machine it was measured on. */
  separateRun?: { machine: string; pinning: string };
}

/** Ours (watchdog), redlock and the Redisson script: 30 s; redis-semaphore 10 s; our simple lock 3 s. */
const LEASE_MS = 30_000;
/** Our clients' `idleKeyTtl` in this scenario (the default is 10 min). */
const IDLE_KEY_TTL_MS = 5_000;
/** Time for Redis's active expiry to reclaim keys whose TTL just ran out, before a sample. */
const MARGIN_MS = 3_000;

/** How long the engine keeps an ended hold's record, read from its script so the wait follows it. */
function recordMemoryMs(): number {
  const file = path.join(__dirname, '..', '..', 'lua', 'include', 'hold-ids.lua');
  const match = /^local ENDED_MEMORY_MS = (\d+)/m.exec(fs.readFileSync(file, 'utf8'));
  if (!match) throw new Error(`no 'local ENDED_MEMORY_MS = <ms>' in ${file}`);
  return Number(match[1]);
}

const nameOf = (i: number): string => `order:${i}`;

/** Locks and releases names 0..names-1 once each, `inFlight` at a time; logs every tenth. */
async function lockEach(c: Contender, names: number, inFlight: number, log: (line: string) => void): Promise<void> {
  let next = 0;
  let done = 0;
  const started = nowMs();
  const step = Math.max(1, Math.ceil(names / 10));
  const worker = async (): Promise<void> => {
    while (next < names) {
      const release = await c.acquire(nameOf(next++));
      await release();
      if (++done % step === 0 && done < names)
        log(`    ${c.id} ${done.toLocaleString('en-US')} names, ${Math.round(done / ((nowMs() - started) / 1000))}/s`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, names) }, worker));
}

async function measure(
  ctx: BenchContext,
  redis: Redis,
  id: ContenderId,
  leaseAtMs: number,
  idleAtMs: number,
): Promise<ManyNamesRow> {
  const { names, namesInFlight } = ctx.config;
  const c = createContender(id, redis, { idleKeyTtl: IDLE_KEY_TTL_MS });
  try {
    await c.ready();
    await (
      await c.acquire('warm-up')
    )(); // loads its scripts before the empty server is sampled
    await ctx.admin.flushall('SYNC');
    const start = nowMs();
    const before = await sampleKeyspace(ctx.admin);
    const started = nowMs();
    await lockEach(c, names, namesInFlight, ctx.log);
    const ended = nowMs();
    const sample = async (point: NamesPoint, atMs: number): Promise<NamesSample> => {
      await sleep(ended + atMs - nowMs());
      const at = nowMs() - ended;
      const taken = { ...(await sampleKeyspace(ctx.admin)), atMs: at };
      ctx.log(
        `  names ${id.padEnd(15)} ${point.padEnd(6)} at ${(taken.atMs / 1000).toFixed(1)} s: used_memory ${(taken.usedMemory / 2 ** 20).toFixed(1)} MiB, DBSIZE ${taken.dbsize}, ${taken.keys} keys, ${taken.noTtl} without TTL, longest TTL ${taken.maxTtlMs ?? '-'} ms`,
      );
      return taken;
    };
    const runMs = ended - started;
    const perSecond = (names / runMs) * 1000;
    ctx.log(`  names ${id.padEnd(15)} ${names} names in ${(runMs / 1000).toFixed(1)} s (${Math.round(perSecond)}/s)`);
    const run = await sample('run', 0);
    const lease = await sample('lease', leaseAtMs);
    const idle = await sample('idle', idleAtMs);
    return {
      runMs,
      perSecond,
      giveUps: c.giveUps,
      samples: { before: { ...before, atMs: start - ended }, run, lease, idle },
    };
  } finally {
    await c.close();
    await ctx.admin.flushall('SYNC');
  }
}

export async function runManyNames(ctx: BenchContext): Promise<ManyNamesResult> {
  const started = Date.now();
  const recordMemory = recordMemoryMs();
  const leaseAtMs = LEASE_MS + MARGIN_MS;
  const idleAtMs = Math.max(LEASE_MS + IDLE_KEY_TTL_MS, recordMemory) + MARGIN_MS;
  const redis = new Redis({ port: ctx.port, host: '127.0.0.1' });
  const rows: Partial<Record<ContenderId, ManyNamesRow>> = {};
  try {
    for (const id of contendersFor(ctx.config.contenders, 'names'))
      rows[id] = await measure(ctx, redis, id, leaseAtMs, idleAtMs);
  } finally {
    redis.disconnect();
  }
  return {
    rows,
    names: ctx.config.names,
    inFlight: ctx.config.namesInFlight,
    leaseMs: LEASE_MS,
    leaseAtMs,
    idleKeyTtlMs: IDLE_KEY_TTL_MS,
    recordMemoryMs: recordMemory,
    idleAtMs,
    date: new Date(started).toISOString(),
    durationS: (Date.now() - started) / 1000,
  };
}
