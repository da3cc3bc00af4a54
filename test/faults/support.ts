/**
 * Shared by the fault suite (test/faults/*.spec.ts): 8 racing processes (test/workers/fault-racer.ts)
 * on one hot key, what to make of their records (double grants, lost updates, outage), and the
 * probes that time a failover. Every scenario runs on its own private topology; the racy counter
 * lives on the shared single server, which no fault test touches, so a failover cannot lose its
 * writes and every lost update is an overlap of two holders.
 */
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { restartNode, signalNode, type RunningTopology } from '../../scripts/redis-topology';
import { epochNow, sleep, type HostPort } from '../../scripts/tooling';
import { parseClusterNodes, parseInfo, withClient } from '../../scripts/topology/probes';
import type { FaultRacerResult } from '../workers/fault-racer';
import { lockKeys, type LockKeys } from '../../lib/engine/redis/keys';
import { sharedTopology } from '../support/topologies';
import { waitFor } from '../support/wait';
import { startWorker, type Worker } from '../support/workers';

export type { FaultRacerResult };

// The clock the racers record with, and the tools' sleep.
export { epochNow, sleep } from '../../scripts/tooling';

export const RACERS = 8;

/** The never-faulted server that holds the racy counters and the fencing-aware resource. */
export function counterServer(): { port: number; redis: Redis } {
  const port = sharedTopology('single').masters[0].port;
  return { port, redis: new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 }) };
}

/** Racing processes, started together; each prints "ready" once connected. */
export class Race {
  private constructor(readonly workers: Worker[]) {}

  /**
   * Starts `count` racers (per-worker extras from `extra(i)`), registered for the caller's cleanup.
   * `file`: another worker with the same protocol ("ready", "stop", a FaultRacerResult).
   */
  static async start(
    count: number,
    env: Record<string, string | number>,
    registry: Worker[],
    extra: (index: number) => Record<string, string | number> = () => ({}),
    file = 'fault-racer.ts',
  ): Promise<Race> {
    const workers = Array.from({ length: count }, (_, i) => startWorker(file, { ...env, ...extra(i) }));
    registry.push(...workers);
    await Promise.all(workers.map((w) => w.waitFor('ready', 60_000)));
    return new Race(workers);
  }

  /** Tells every racer to stop and collects what each recorded. */
  async stop(): Promise<FaultRacerResult[]> {
    for (const w of this.workers) if (w.child.exitCode === null) w.send('stop');
    return (await Promise.all(this.workers.map((w) => w.result))) as FaultRacerResult[];
  }
}

export interface Section {
  proc: number;
  requested: number;
  start: number;
  end: number;
  token: number;
}

export function sectionsOf(results: FaultRacerResult[]): Section[] {
  return results
    .flatMap((r, proc) => r.sections.map(([requested, start, end, token]) => ({ proc, requested, start, end, token })))
    .sort((a, b) => a.start - b.start);
}

/**
 * Critical sections that began, by the racers' own timestamps, while another process's section was
 * still running: a diagnostic for failure reports. The racers' clocks are not one clock (see
 * CLOCK_TOLERANCE_MS), so the check of mutual exclusion is RaceReport.doubleGrants (crowded sections).
 */
export function timestampOverlaps(sections: Timed[]): number {
  return overlappingPairs(sections).length;
}

/**
 * How far two racers' clocks may disagree: each converts its own high-resolution clock to epoch time
 * through performance.timeOrigin, fixed per process only to a few milliseconds under load. CI showed
 * sub-millisecond "overlaps" between consecutive grants, and one racer whose clock ran ~3 ms behind the
 * others (its fencing tokens lower than those of sections it seemed to overlap, 0 lost updates in 801
 * sections). Overlaps within this are not counted; the racy counter stays the check of real overlaps.
 */
export const CLOCK_TOLERANCE_MS = 5;

/** What the timestamp checks read of a section: its process and its own clock's start and end. */
type Timed = Pick<Section, 'proc' | 'start' | 'end'>;

/**
 * Each section that began more than the clocks' tolerance before another process's section ended, with
 * that section. `sections` in order of start (see sectionsOf).
 */
export function overlappingPairs<S extends Timed>(sections: S[]): [S, S][] {
  const pairs: [S, S][] = [];
  let open: S[] = [];
  for (const s of sections) {
    open = open.filter((o) => o.end > s.start);
    const other = open.find((o) => o.proc !== s.proc && o.end - s.start > CLOCK_TOLERANCE_MS);
    if (other) pairs.push([other, s]);
    open.push(s);
  }
  return pairs;
}

/** The first section that started at or after `at` (and, unless `anyRequest`, was requested then too). */
export function firstSectionAfter(sections: Section[], at: number, anyRequest = false): Section | undefined {
  return sections.find((s) => s.start >= at && (anyRequest || s.requested >= at));
}

/** The longest time between two consecutive section starts inside [from, to], ms (the window's edges count). */
export function longestGap(sections: Section[], from: number, to: number): number {
  const starts = [from, ...sections.map((s) => s.start).filter((t) => t > from && t < to), to];
  return Math.max(...starts.slice(1).map((t, i) => t - starts[i]));
}

export interface RaceReport {
  sections: number;
  /**
   * Critical sections that found another holder inside (counted on the counter server, so no clock
   * is involved): the check of mutual exclusion, with lostUpdates.
   */
  doubleGrants: number;
  /** Overlaps of the racers' own timestamps beyond CLOCK_TOLERANCE_MS: a diagnostic, clocks differ. */
  clockOverlaps: number;
  /** Critical sections minus the counter they incremented. */
  lostUpdates: number;
  /** The longest time from the fault on with no critical section starting, ms (Infinity: none started). */
  outageMs: number;
  /** Sections that ended before the fault / started after it. */
  before: number;
  after: number;
  lost: Record<string, number>;
  errors: Record<string, number>;
  releases: Record<string, number>;
  /** The first overlapping pairs, timed from the fault (what a failure needs to be understood). */
  overlaps: string[];
}

/** `[proc] requested/start/end relative to the fault, token` for one section. */
function describeSection(s: Section, faultAt: number): string {
  const at = (t: number): string => `${(t - faultAt).toFixed(1)}`;
  return `p${s.proc} req ${at(s.requested)} start ${at(s.start)} end ${at(s.end)} token ${s.token}`;
}

function merge(records: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of records) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v;
  return out;
}

/** `faultAt` is when the fault happened (epochNow). */
export function analyse(results: FaultRacerResult[], counter: number, faultAt: number): RaceReport {
  const sections = sectionsOf(results);
  const after = sections.filter((s) => s.start >= faultAt);
  return {
    sections: sections.length,
    doubleGrants: results.reduce((sum, r) => sum + r.crowded, 0),
    clockOverlaps: timestampOverlaps(sections),
    lostUpdates: sections.length - counter,
    // The longest time without a grant from the fault on: one grant the failing server answered in
    // its last milliseconds does not hide the outage that follows it.
    outageMs: after.length === 0 ? Infinity : longestGap(sections, faultAt, after[after.length - 1].start + 1),
    before: sections.filter((s) => s.end < faultAt).length,
    after: sections.filter((s) => s.start >= faultAt).length,
    lost: merge(results.map((r) => r.lost)),
    errors: merge(results.map((r) => r.errors)),
    releases: merge(results.map((r) => r.releases)),
    overlaps: overlappingPairs(sections)
      .slice(0, 5)
      .map(([a, b]) => `${describeSection(a, faultAt)} | ${describeSection(b, faultAt)}`),
  };
}

/** Each racer's slow or failed lock() calls, timed from `from`, under its client id's first 8 characters. */
export function slowCalls(results: FaultRacerResult[], from: number): string {
  const at = (t: number): string => (t - from).toFixed(0);
  return results
    .map(
      (r) =>
        `${r.clientId.slice(0, 8)}: ${r.slowCalls.map(([a, b, o]) => `${at(a)}..${at(b)} ${o}`).join(', ')}` +
        ` [connection: ${r.connection
          .filter(([t]) => t >= from - 1_000)
          .slice(0, 40)
          .map(([t, e]) => `${at(t)} ${e}`)
          .join(', ')}]`,
    )
    .join(' | ');
}

const counts = (c: Record<string, number>): string =>
  Object.keys(c).length === 0
    ? 'none'
    : Object.entries(c)
        .map(([k, v]) => `${k} x${v}`)
        .join(', ');

/** Prints one scenario's measurements (jest shows stdout of passing tests too). */
export function printReport(title: string, r: RaceReport, extra: Record<string, string | number> = {}): void {
  const lines = [
    `\n[fault] ${title}`,
    `  outage (longest time without a grant from the fault on): ${Math.round(r.outageMs)} ms` +
      Object.entries(extra)
        .map(([k, v]) => `, ${k}: ${typeof v === 'number' ? Math.round(v) : v}`)
        .join(''),
    `  ${r.sections} critical sections (${r.before} before the fault, ${r.after} after), ` +
      `double grants ${r.doubleGrants}, lost updates ${r.lostUpdates}, timestamp overlaps ${r.clockOverlaps}`,
    `  lost holds: ${counts(r.lost)}; releases: ${counts(r.releases)}; errors: ${counts(r.errors)}`,
    ...r.overlaps.map((o) => `  overlap (ms from the fault): ${o}`),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

/** Resolves once the counter reached `atLeast`; false after `timeoutMs`. */
export async function counterReaches(redis: Redis, key: string, atLeast: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (Number(await redis.get(key)) >= atLeast) return true;
    await sleep(50);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Sentinel

/** The master the first sentinel names now. */
export async function sentinelMaster(t: RunningTopology): Promise<HostPort> {
  const [host, port] = (await withClient(t.sentinels[0], (c) =>
    c.call('SENTINEL', 'get-master-addr-by-name', t.sentinelMasterName!),
  )) as [string, string];
  return { host, port: Number(port) };
}

/** Polls the sentinels until one names a master other than `oldPort`; resolves with that moment (epochNow). */
export async function sentinelSwitched(t: RunningTopology, oldPort: number, timeoutMs = 30_000): Promise<number> {
  const sentinels = t.sentinels.map((s) => new Redis({ ...s, maxRetriesPerRequest: 0, commandTimeout: 500 }));
  try {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const answers = await Promise.all(
        sentinels.map((s) =>
          (s.call('SENTINEL', 'get-master-addr-by-name', t.sentinelMasterName!) as Promise<[string, string]>).catch(
            () => undefined,
          ),
        ),
      );
      if (answers.some((a) => a && Number(a[1]) !== oldPort)) return epochNow();
      await sleep(20);
    }
    throw new Error(`no sentinel of ${t.name} switched away from ${oldPort} within ${timeoutMs} ms`);
  } finally {
    sentinels.forEach((s) => s.disconnect());
  }
}

/**
 * Brings a faulted sentinel topology back to full health for the next case: the faulted node
 * (`restart`: killed, started again; otherwise paused and resumed) is made a replica of the current
 * master, then we wait until every sentinel agrees on the master and sees 3 healthy replicas, and the
 * master has 3 online replicas.
 */
export async function healSentinel(t: RunningTopology, faulted: number, restart: boolean): Promise<void> {
  if (restart) await restartNode(t, faulted);
  // It comes back as an empty master, or as the master it was before a failover it slept through;
  // sentinel would convert it only after ~8 s of seeing it, so point it at the current master at once.
  const master = await sentinelMaster(t);
  if (master.port !== faulted) {
    await withClient({ host: '127.0.0.1', port: faulted }, (c) => c.call('REPLICAOF', master.host, master.port));
  }
  await waitFor(
    `${t.name} healthy again`,
    async () => {
      const master = await sentinelMaster(t);
      for (const sentinel of t.sentinels) {
        const ok = await withClient(sentinel, async (c) => {
          const [host, port] = (await c.call('SENTINEL', 'get-master-addr-by-name', t.sentinelMasterName!)) as string[];
          if (host !== master.host || Number(port) !== master.port) return false;
          const replicas = (await c.call('SENTINEL', 'replicas', t.sentinelMasterName!)) as string[][];
          const flags = replicas.map((r) => r[r.indexOf('flags') + 1]);
          return flags.length === 3 && flags.every((f) => f === 'slave');
        });
        if (!ok) return undefined;
      }
      const info = parseInfo(await withClient(master, (c) => c.info('replication')));
      const online = Object.entries(info).filter(([k, v]) => /^slave\d+$/.test(k) && v.includes('state=online'));
      return info.role === 'master' && online.length === 3 ? true : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

export interface SentinelCase {
  kind: 'reentrant' | 'fair';
  /** explicit: lock({ waitTime: 10_000, leaseTime: 10_000 }); watchdog: no leaseTime, watchdogTimeout 10 s. */
  lease: 'explicit' | 'watchdog';
}

/** How long a paused master stays SIGSTOPped. */
export const PAUSE_MS = 4_000;

/**
 * No master, no grant: a section that starts this long after the master stopped answering, and before
 * a replica took over, would have been granted by nobody. Slack for a grant already on its way back,
 * and a busy machine.
 */
export const NO_MASTER_GRACE_MS = 250;

/**
 * The failover time is when a poll of the sentinels (every 20 ms, plus its round trip) first names the
 * promoted replica; the replica is already a master, and can grant, a little before that poll sees it
 * (a CI run had a grant 6 ms before). Sections that start this close to it count as after the failover.
 */
export const FAILOVER_SEEN_LATE_MS = 50;

/**
 * One sentinel fault under load: 8 racers on one key until 100 critical sections ran, then the
 * current master is SIGKILLed (`kill`) or SIGSTOPped for PAUSE_MS (`pause`); the racers go on until
 * 50 more sections ran after the fault (at most 25 s) plus 1 s. Failover time = fault -> a sentinel
 * names another master (for a pause that never switched: -> SIGCONT). Leaves the topology healthy.
 */
export async function sentinelFaultCase(
  t: RunningTopology,
  fault: 'kill' | 'pause',
  { kind, lease }: SentinelCase,
  registry: Worker[],
): Promise<{ report: RaceReport; failoverMs: number; phases: string; withoutMaster: string[] }> {
  const counter = counterServer();
  const began = Date.now();
  const phases: string[] = [];
  const phase = (name: string): number => phases.push(`${name} ${((Date.now() - began) / 1000).toFixed(1)}s`);
  const prefix = `fault-${randomUUID().slice(0, 8)}`;
  const counterKey = `${prefix}:counter`;
  let sampler: ReturnType<typeof sampleLockState> | undefined;
  try {
    const race = await Race.start(
      RACERS,
      {
        CONNECTION: JSON.stringify({ type: 'sentinel', sentinels: t.sentinels, masterName: t.sentinelMasterName }),
        KEY_PREFIX: prefix,
        LOCK_NAME: 'hot',
        LOCK_KIND: kind,
        COUNTER_PORT: counter.port,
        COUNTER_KEY: counterKey,
        WAIT_MS: 10_000,
        ...(lease === 'explicit' ? { LEASE_MS: 10_000 } : { WATCHDOG_MS: 10_000 }),
      },
      registry,
    );
    phase('racers ready');
    sampler = sampleLockState(t, lockKeys(prefix, 'hot'));
    if (!(await counterReaches(counter.redis, counterKey, 100, 30_000))) {
      throw new Error(`the racers made no progress; lock state (ms from ready): ${(await sampler.stop()).join(' ; ')}`);
    }
    const master = await sentinelMaster(t);
    const switched = sentinelSwitched(t, master.port, 30_000);
    switched.catch(() => undefined);
    let failoverAt: number;
    // The fault time is taken once the signal is delivered: a lock() called before that could still be
    // granted by the master, and would read as no outage at all.
    let faultAt: number;
    if (fault === 'kill') {
      await signalNode(t, master.port, 'SIGKILL');
      faultAt = epochNow();
      failoverAt = await switched;
    } else {
      await signalNode(t, master.port, 'SIGSTOP');
      faultAt = epochNow();
      try {
        const early = await Promise.race([switched, sleep(PAUSE_MS).then(() => undefined)]);
        await sleep(Math.max(0, faultAt + PAUSE_MS - epochNow()));
        failoverAt = early ?? epochNow(); // no switch during the pause: the master is back now
      } finally {
        await signalNode(t, master.port, 'SIGCONT');
      }
    }
    const atFault = Number(await counter.redis.get(counterKey));
    sampler.restart(faultAt);
    await counterReaches(counter.redis, counterKey, atFault + 50, 25_000);
    const samples = await sampler.stop();
    await sleep(1_000);
    phase('recovered');
    const results = await race.stop();
    const report = analyse(results, Number(await counter.redis.get(counterKey)), faultAt);
    const withoutMaster = sectionsOf(results)
      .filter((s) => s.start > faultAt + NO_MASTER_GRACE_MS && s.start < failoverAt - FAILOVER_SEEN_LATE_MS)
      .map((s) => describeSection(s, faultAt));
    phase('stopped');
    // What the lock looked like on the promoted master while nobody held it, should the outage be long,
    // and what each racer's slow lock() calls were doing meanwhile.
    if (report.outageMs > failoverAt - faultAt + 1_000) {
      phases.push(`lock state: ${samples.join(' ; ')}`);
      phases.push(`slow calls (ms from the fault): ${slowCalls(results, faultAt)}`);
    }
    await healSentinel(t, master.port, fault === 'kill');
    phase('healed');
    return { report, failoverMs: failoverAt - faultAt, phases: phases.join(', '), withoutMaster };
  } finally {
    await sampler?.stop();
    counter.redis.disconnect();
  }
}

/**
 * Samples the hot lock's keys on whichever master sentinel names, every 250 ms until stopped: one
 * line per change (ms from the start or the last restart, holders, queue, waiting set), for a failure report.
 */
function sampleLockState(
  t: RunningTopology,
  keys: LockKeys,
): { restart(from: number): void; stop(): Promise<string[]> } {
  let samples: string[] = [];
  let faultAt = epochNow();
  let running = true;
  const loop = (async () => {
    let last = '';
    while (running) {
      await sleep(250);
      try {
        const master = await sentinelMaster(t);
        const state = await withClient(master, async (c) => {
          const [holders, pttl, queue, waiting] = await Promise.all([
            c.hgetall(keys.lock).catch(() => c.get(keys.lock)),
            c.pttl(keys.lock),
            c.lrange(keys.queue, 0, -1),
            c.zrange(keys.waiting, 0, -1),
          ]);
          const short = (id: string): string => id.replace(/([0-9a-f]{8})[0-9a-f-]{28}/g, '$1');
          return short(
            `${master.port} holders ${JSON.stringify(holders)} pttl ${Math.round(pttl / 500) * 500} ` +
              `queue [${queue.join(',')}] waiting [${waiting.join(',')}]`,
          );
        });
        if (state !== last) samples.push(`${Math.round(epochNow() - faultAt)}: ${state}`);
        last = state;
      } catch (error) {
        samples.push(`${Math.round(epochNow() - faultAt)}: ${(error as Error).message}`);
      }
    }
  })();
  return {
    restart(from: number) {
      samples = [];
      faultAt = from;
    },
    async stop() {
      running = false;
      await loop;
      return samples.slice(-40);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Cluster

/** The master serving `key`'s slot and its replica (port and node id of each). */
export async function clusterShard(
  t: RunningTopology,
  key: string,
  /** The node asked (default: the first master; after a kill, a live one). */
  via: HostPort = t.masters[0],
): Promise<{ master: { port: number; id: string }; replica: { port: number; id: string } }> {
  return withClient(via, async (c) => {
    const slot = Number(await c.call('CLUSTER', 'KEYSLOT', key));
    const nodes = parseClusterNodes(String(await c.call('CLUSTER', 'NODES')));
    const master = nodes.find(
      (n) =>
        n.flags.includes('master') &&
        n.slots.some((range) => {
          const [from, to = from] = range.split('-').map(Number);
          return slot >= from && slot <= to;
        }),
    );
    const replica = nodes.find((n) => master && n.masterId === master.id);
    if (!master || !replica) throw new Error(`${t.name}: no master with a replica serves slot ${slot}`);
    return { master: { port: master.port, id: master.id }, replica: { port: replica.port, id: replica.id } };
  });
}

/** Polls `survivor` until it sees node `replicaId` as a master owning slots; resolves with that moment (epochNow). */
export async function clusterPromoted(
  t: RunningTopology,
  survivor: HostPort,
  replicaId: string,
  timeoutMs = 30_000,
): Promise<number> {
  const admin = new Redis({ ...survivor, maxRetriesPerRequest: 0, commandTimeout: 500 });
  try {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const nodes = parseClusterNodes(String(await admin.call('CLUSTER', 'NODES').catch(() => '')));
      if (nodes.some((n) => n.id === replicaId && n.flags.includes('master') && n.slots.length > 0)) return epochNow();
      await sleep(20);
    }
    throw new Error(`${t.name}: replica ${replicaId} was not promoted within ${timeoutMs} ms`);
  } finally {
    admin.disconnect();
  }
}
