import * as fs from 'node:fs';
import * as path from 'node:path';
import type { BenchConfig } from '../lib/context';
import { CONTENDER_CONFIG, CONTENDER_LABELS, POLLING, contendersFor, type ContenderId } from '../lib/contenders';
import type { Pinning } from '../lib/pinning';
import { median } from '../lib/stats';
import type { HotKeyResult, HotKeyRow } from '../scenarios/hot-key';
import type { WaitersResult } from '../scenarios/many-waiters';
import type { ParallelResult } from '../scenarios/parallel';
import type { StartupResult } from '../scenarios/startup';
import type { UncontendedResult } from '../scenarios/uncontended';
import type { WatchdogResult } from '../scenarios/watchdog';
import type { FailoverResult, FailoverRow } from '../scenarios/failover';
import type { SharedResult } from '../scenarios/shared';
import type { ManyNamesResult } from '../scenarios/many-names';
import type { MachineInfo } from './machine';
import { int, n, pct, table, us } from './cells';
import { formatLikeRepo } from './format';
import { manyNamesSection } from './many-names';
import { prose } from './prose';
import { renderSvg } from './svg';
import { best as bestOf, evaluateTargets, type TargetRow } from './targets';

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
  /** Many names, once each (`--only=names`; maybe from a run of its own, see bench/report/merge.ts). */
  names?: ManyNamesResult;
  durationS?: number;
}

// ---------------------------------------------------------------------------------------------
// Formatting

const label = (id: ContenderId): string => CONTENDER_LABELS[id];
/** Values of several contenders, as the prose lists them: "1.56 / 1.83 / 1.78". */
const each = <T>(ids: readonly T[], value: (id: T) => string): string => ids.map(value).join(' / ');

/** Sum of the given commands' per-acquisition counts over a row's rounds, median over rounds. */
function commandsPerAcq(row: HotKeyRow, names: string[]): number {
  return median(row.rounds.map((m) => names.reduce((s, name) => s + (m.executedByCommand[name] ?? 0), 0)));
}

/** How far the client-side count of sent commands strays from commandstats' top-level count, for the method note. */
function crossCheck(r: BenchResults): string {
  const pairs: [number, number][] = [];
  for (const hot of [r.hotKey, r.hotKey1ms])
    for (const row of Object.values(hot?.rows ?? {})) if (row) pairs.push([row.sentPerAcq, row.commandsPerAcq]);
  for (const level of r.waiters?.levels ?? [])
    for (const row of Object.values(level.rows)) if (row) pairs.push([row.sentPerAcq, row.commandsPerAcq]);
  const deviations = pairs.filter(([, c]) => c > 0).map(([sent, c]) => Math.abs(sent - c) / c);
  if (deviations.length === 0) return '';
  return prose('header', 'cross-check', { median: pct(median(deviations)), worst: pct(Math.max(...deviations)) });
}

// ---------------------------------------------------------------------------------------------
// Sections: the words are in prose/<section>.md; here only the tables and the values they are filled with.

function header(r: BenchResults): string {
  const m = r.machine;
  return prose('header', 'section', {
    date: m.date.slice(0, 10),
    durationS: n(r.durationS, 0),
    quick: r.config.quick ? ` ${prose('header', 'quick')}` : '',
    separate: r.names?.separateRun ? ` ${prose('header', 'separate')}` : '',
    machineTable: table(
      ['', ''],
      [
        ['CPU', `${m.cpuModel}, ${m.cores} cores`],
        ['OS', m.os],
        ['Node', m.node],
        ['Redis', `${m.redis} (standalone, no persistence, started by scripts/redis-topology.ts on port 7300)`],
        ['Pinning', r.pinning.description],
        [
          'Load average (1 min)',
          `${n(m.loadStart)} at the start, ${n(m.loadEnd)} at the end (the bench itself included; anything above that is other work sharing the 2 CPUs)`,
        ],
        ...Object.entries(m.versions).map(([name, version]) => [name, version]),
        ['Date', m.date],
        [
          'Rounds',
          `${r.config.rounds} (uncontended, parallel, hot keys), ${r.config.waitersRounds} (many waiters); contenders interleaved A B C … then again, tables show the median over rounds`,
        ],
        ...(r.config.turnTime === undefined
          ? []
          : [
              [
                'turnTime',
                `${r.config.turnTime} ms for our reentrant and simple locks (\`--turn-time\`), not the default 10 ms that the configurations and the prose below describe`,
              ],
            ]),
      ],
      ['l', 'l'],
    ),
    contendersTable: table(
      ['Contender', 'Configuration'],
      r.config.contenders.map((id) => [label(id), CONTENDER_CONFIG[id]]),
      ['l', 'l'],
    ),
    crossCheck: crossCheck(r),
  });
}

function targetsSection(rows: TargetRow[]): string {
  return prose('targets', 'section', {
    met: String(rows.filter((t) => t.met).length),
    total: String(rows.length),
    table: table(
      ['Target', 'Lock', 'Measured', 'Bound', 'Result'],
      rows.map((t) => [t.target, label(t.lock), t.measured, t.bound, t.met ? 'met' : '**missed**']),
      ['l', 'l', 'r', 'l', 'l'],
    ),
  });
}

function uncontendedSection(u: UncontendedResult, ids: ContenderId[]): string {
  return prose('uncontended', 'section', {
    iterations: String(u.iterations),
    rttUs: us(u.rttMs),
    rttP99Us: us(u.rttP99Ms),
    table: table(
      [
        'Contender',
        'acquire p50 µs',
        'p99 µs',
        'release p50 µs',
        'p99 µs',
        'acquire RTT',
        'release RTT',
        'client CPU µs',
        'Redis µs',
      ],
      ids
        .filter((id) => u.rows[id])
        .map((id) => {
          const r = u.rows[id]!;
          return [
            label(id),
            us(r.acquireP50),
            us(r.acquireP99),
            us(r.releaseP50),
            us(r.releaseP99),
            n(r.acquireRtt),
            n(r.releaseRtt),
            int(r.clientCpuUs),
            n(r.redisUs, 1),
          ];
        }),
    ),
  });
}

function parallelSection(p: ParallelResult, ids: ContenderId[]): string {
  return prose('parallel', 'section', {
    keys: String(p.keys),
    durationS: String(p.durationMs / 1000),
    table: table(
      ['Contender', 'acquisitions / s'],
      ids.filter((id) => p.rows[id]).map((id) => [label(id), int(p.rows[id]!.perSecond)]),
    ),
  });
}

/** "14 windows: 1,587 → 1,267 → 1,654 → … → 2,464 → 2,519" */
function summariseWarmup(rates: number[]): string {
  const shown = rates.length <= 7 ? rates.map(int) : [...rates.slice(0, 3).map(int), '…', ...rates.slice(-3).map(int)];
  return `${rates.length} windows: ${shown.join(' → ')}`;
}

interface HotKeyText {
  title: string;
  /** What a holder does inside the lock, from "Inside the lock each holder" on. */
  criticalSection: string;
  /** Warm-up: acquisitions per process on average, and the most 1 s windows it may take. */
  warmupGrants: number;
  warmupMaxWindows: number;
}

function hotKeySection(h: HotKeyResult, ids: ContenderId[], rttMs: number, text: HotKeyText): string {
  const rows = ids.filter((id) => h.rows[id]);
  return [
    prose('hot-key', 'section', {
      title: text.title,
      processes: String(h.processes),
      windowS: String(h.windowMs / 1000),
      criticalSection: text.criticalSection,
      rttUs: us(rttMs),
    }),
    '',
    ...(h.warmup
      ? [
          prose('hot-key', 'warmup', { grants: int(text.warmupGrants), maxWindows: String(text.warmupMaxWindows) }),
          '',
          table(
            ['Contender', 'warm-up windows'],
            rows.map((id) => [label(id), summariseWarmup(h.warmup?.[id] ?? [])]),
            ['l', 'l'],
          ),
          '',
        ]
      : []),
    table(
      [
        'Contender',
        'acq/s',
        'hand-off p50 ms',
        'p99 ms',
        'to other process',
        'wait p50 ms',
        'wait p99 ms',
        'wait max ms',
        'Jain',
        'lost updates',
        'commands/acq',
        'incl. Lua',
        'client CPU ms/acq',
        'Redis CPU ms/acq',
        'give-ups',
      ],
      rows.map((id) => {
        const r = h.rows[id]!;
        return [
          label(id),
          int(r.perSecond),
          n(r.handoffP50),
          n(r.handoffP99),
          pct(r.crossProcessShare),
          n(r.waitP50),
          n(r.waitP99, 1),
          int(r.waitMax),
          n(r.jain, 3),
          String(r.lostUpdates),
          n(r.commandsPerAcq),
          n(r.executedPerAcq, 1),
          n(r.clientCpuPerAcqMs, 3),
          n(r.redisCpuPerAcqMs, 3),
          int(r.giveUps),
        ];
      }),
    ),
  ].join('\n');
}

function waitersSection(w: WaitersResult, ids: ContenderId[]): string {
  const levels = w.levels;
  const matrix = (value: (id: ContenderId, level: WaitersResult['levels'][number]) => string): string =>
    table(
      ['Contender', ...levels.map((l) => `${l.waiters} waiter${l.waiters === 1 ? '' : 's'} (${l.processes} proc.)`)],
      ids.map((id) => [label(id), ...levels.map((l) => value(id, l))]),
    );
  const lost = levels.flatMap((l) =>
    ids
      .filter((id) => (l.rows[id]?.lostUpdates ?? 0) !== 0)
      .map((id) =>
        prose('waiters', 'lost-updates', {
          contender: label(id),
          waiters: String(l.waiters),
          count: String(l.rows[id]!.lostUpdates),
        }),
      ),
  );
  return prose('waiters', 'section', {
    windowS: String(w.windowMs / 1000),
    commandsTable: matrix((id, l) => n(l.rows[id]?.commandsPerAcq)),
    executedTable: matrix((id, l) => n(l.rows[id]?.executedPerAcq, 1)),
    rateTable: matrix((id, l) => int(l.rows[id]?.perSecond)),
    waitTable: matrix((id, l) => int(l.rows[id]?.waitP99)),
    redisCpuTable: matrix((id, l) => n(l.rows[id]?.redisCpuPerAcqMs, 3)),
    giveUpsTable: matrix((id, l) => int(l.rows[id]?.giveUps)),
    lostUpdates: lost.length === 0 ? prose('waiters', 'no-lost-updates') : lost.join('; '),
  });
}

function watchdogSection(wd: WatchdogResult): string {
  return prose('watchdog', 'section', {
    locks: wd.locks.toLocaleString('en-US'),
    acquireAllS: n(wd.acquireAllMs / 1000, 1),
    ticks: String(wd.ticks),
    table: table(
      ['Per tick', 'value'],
      [
        ['Round trips (standalone commands + pipelines)', n(wd.roundTrips, 0)],
        ['Pipelines', n(wd.pipelines, 0)],
        ['Commands', int(wd.commands)],
        ['Wall time', `${n(wd.wallMs, 1)} ms`],
        [
          'Client CPU (process.cpuUsage around tick())',
          `${n(wd.clientCpuMs, 1)} ms (${n((wd.clientCpuMs * 1000) / wd.locks, 1)} µs per lock)`,
        ],
        [
          'Redis CPU (INFO cpu delta)',
          `${n(wd.redisCpuMs, 1)} ms (${n((wd.redisCpuMs * 1000) / wd.locks, 1)} µs per lock)`,
        ],
        ['Locks still held after the ticks / lost', `${int(wd.heldAfter)} / ${wd.lost}`],
      ],
      ['l', 'r'],
    ),
  });
}

function startupSection(s: StartupResult): string {
  const row = (name: string, c: StartupResult['natural']): string[] => [
    name,
    `${c.stalled} of ${c.trials}`,
    int(c.medianSpanMs),
    int(c.worstSpanMs),
    c.serverSubscribers ? c.serverSubscribers.join(', ') : '',
  ];
  return prose('startup', 'section', {
    burst: String(s.burst),
    holdMs: String(s.holdMs),
    leaseMs: String(s.leaseMs),
    table: table(
      ['Case', 'stalled bursts', 'median burst ms', 'worst burst ms', 'server subscribers'],
      [row('natural', s.natural), row('forced', s.forced)],
      ['l', 'r', 'r', 'r', 'l'],
    ),
  });
}

export function failoverTable(f: FailoverResult): string {
  const ms = (v: number | undefined): string => (v === undefined ? 'n/a' : Number.isFinite(v) ? int(v) : 'none');
  const cells = (row: FailoverRow | undefined): string[] => [
    ms(row?.failoverMs),
    ms(row?.outageMs),
    row ? String(row.doubleGrants) : 'n/a',
    row ? String(row.lostUpdates) : 'n/a',
  ];
  const ids = [...new Set([...Object.keys(f.rows.kill), ...Object.keys(f.rows.pause)])] as ContenderId[];
  return table(
    [
      'Contender',
      'kill: failover ms',
      'outage ms',
      'double grants',
      'lost updates',
      `pause ${f.pauseMs / 1000} s: failover ms`,
      'outage ms',
      'double grants',
      'lost updates',
    ],
    ids.map((id) => [label(id), ...cells(f.rows.kill[id]), ...cells(f.rows.pause[id])]),
  );
}

function failoverSection(f: FailoverResult): string {
  const ours = (['reentrant', 'fair'] as const).filter((id) => f.rows.kill[id] || f.rows.pause[id]);
  const peers = (['raw', 'semaphore', 'redlock'] as const).filter((id) => f.rows.kill[id] || f.rows.pause[id]);
  const outages = (ids: readonly ContenderId[], fault: 'kill' | 'pause'): number[] =>
    ids.map((id) => f.rows[fault][id]?.outageMs ?? NaN).filter((v) => !Number.isNaN(v));
  const worst = (ids: readonly ContenderId[], fault: 'kill' | 'pause'): string => ms(Math.max(...outages(ids, fault)));
  const best = (ids: readonly ContenderId[], fault: 'kill' | 'pause'): string => ms(Math.min(...outages(ids, fault)));
  return [
    prose('failover', 'section', {
      processes: String(f.processes),
      pauseS: String(f.pauseMs / 1000),
      table: failoverTable(f),
    }),
    '',
    ...(ours.length > 0 && peers.length > 0
      ? [
          prose('failover', 'ours-against-theirs', {
            oursKill: worst(ours, 'kill'),
            peersKillBest: best(peers, 'kill'),
            peersKillWorst: worst(peers, 'kill'),
            oursPause: worst(ours, 'pause'),
            peersPauseBest: best(peers, 'pause'),
            peersPauseWorst: worst(peers, 'pause'),
          }),
        ]
      : []),
  ].join('\n');

  function ms(v: number): string {
    return Number.isFinite(v) ? int(v) : 'n/a';
  }
}

// ---------------------------------------------------------------------------------------------
// Analysis: what limits each missed target, with the numbers of this run.

/**
 * The fair lock's throughput target against the wake-one FIFO floor (bench/lib/hand-off-floor.ts),
 * when it was missed and the floor ran: how far the least a lock that moves at every grant can do
 * gets on this machine, in each hot-key scenario.
 */
function fifoFloorAnalysis(r: BenchResults, fairMissed: boolean): string | undefined {
  const scenarios = [
    { name: 'the hot key', result: r.hotKey },
    { name: 'the 1 ms section', result: r.hotKey1ms },
  ].flatMap(({ name, result }) => {
    const floor = result?.rows['hand-off-floor'];
    const fair = result?.rows.fair;
    const best = result && bestOf([...POLLING], result.rows, (row) => row.perSecond, 'max');
    return floor && fair && best ? [{ name, floor, fair, best }] : [];
  });
  if (!fairMissed || scenarios.length === 0) return undefined;
  return prose('analysis', 'fifo-floor', {
    scenarios: each(scenarios, (s) => s.name),
    'floor.rate': each(scenarios, (s) => `${int(s.floor.perSecond)}/s`),
    'floor.share': each(scenarios, (s) => `${n(s.floor.perSecond / s.best.value)}×`),
    bestPeers: each(scenarios, (s) => label(s.best.id)),
    'floor.crossProcessShare': each(scenarios, (s) => pct(s.floor.crossProcessShare)),
    'fair.share': each(scenarios, (s) => `${n(s.fair.perSecond / s.best.value)}×`),
    'fair.ofFloor': each(scenarios, (s) => `${n(s.fair.perSecond / s.floor.perSecond)}×`),
    verdict: prose(
      'analysis',
      scenarios.every((s) => s.floor.perSecond < 0.95 * s.best.value)
        ? 'fifo-floor-below-target'
        : 'fifo-floor-reaches-target',
    ),
  });
}

function analysis(r: BenchResults, targets: TargetRow[]): string {
  const out: string[] = [prose('analysis', 'heading'), ''];
  const missed = (prefix: string): TargetRow[] => targets.filter((t) => !t.met && t.target.startsWith(prefix));
  const u = r.uncontended;
  const h = r.hotKey;
  const w = r.waiters;
  const rtt = u?.rttMs ?? NaN;
  const level = (waiters: number) => w?.levels.find((l) => l.waiters === waiters);

  if (missed('Uncontended').length > 0 && u) {
    const ours = (['reentrant', 'fair', 'simple'] as const).filter((id) => u.rows[id]);
    const raw = u.rows.raw;
    const redlock = u.rows.redlock;
    out.push(
      prose('analysis', 'uncontended', {
        'ours.acquireRtt': ours.map((id) => `${n(u.rows[id]!.acquireRtt)} RTT (${label(id)})`).join(', '),
        'ours.releaseRtt': each(ours, (id) => n(u.rows[id]!.releaseRtt)),
        'raw.acquireRtt': n(raw?.acquireRtt),
        'raw.releaseRtt': n(raw?.releaseRtt),
        'redlock.acquireRtt': n(redlock?.acquireRtt),
        'redlock.releaseRtt': n(redlock?.releaseRtt),
        rttUs: us(rtt),
        'ours.redisUs': each(ours, (id) => n(u.rows[id]!.redisUs, 1)),
        'raw.redisUs': n(raw?.redisUs, 1),
        'ours.clientCpuUs': each(ours, (id) => int(u.rows[id]!.clientCpuUs)),
        'raw.clientCpuUs': int(raw?.clientCpuUs),
        'ours.excessUs': each(ours, (id) => us(u.rows[id]!.acquireP50 - rtt)),
        'ours.excessAtHalfMsRtt': each(ours, (id) => n(1 + (u.rows[id]!.acquireP50 - rtt) / 0.5)),
      }),
      '',
    );
    const redisson = u.rows['redisson-script'];
    if (redisson) {
      out.push(
        prose('analysis', 'uncontended-floor', {
          acquireRtt: n(redisson.acquireRtt),
          releaseRtt: n(redisson.releaseRtt),
          redisUs: n(redisson.redisUs, 1),
          verdict: prose('analysis', redisson.acquireRtt > 1.15 ? 'floor-above-bound' : 'floor-within-bound'),
          'ours.aboveFloorUs': each(ours, (id) => us(u.rows[id]!.acquireP50 - redisson.acquireP50)),
        }),
        '',
      );
    }
  }

  const noSdk = missed('No-SDK telemetry');
  if (noSdk.length > 0) {
    out.push(
      prose('analysis', 'no-sdk', {
        missed: noSdk
          .map((t) =>
            prose('analysis', 'missed-no-sdk', {
              target: t.target.replace('No-SDK telemetry: ', ''),
              measured: t.measured,
            }),
          )
          .join('; '),
      }),
      '',
    );
  }

  if (h) {
    const ours = (['reentrant', 'fair', 'simple'] as const).filter((id) => h.rows[id]);
    const turns = ours.filter((id) => id !== 'fair');
    const peers = (['redlock', 'redlock-10ms', 'semaphore', 'raw'] as const).filter((id) => h.rows[id]);
    const util = (id: ContenderId, which: 'client' | 'redis'): number => {
      const row = h.rows[id]!;
      return (row.perSecond * (which === 'client' ? row.clientCpuPerAcqMs : row.redisCpuPerAcqMs)) / 1000;
    };
    const hotMissed = [
      'Hot key: throughput',
      'Hot key: hand-off',
      'Hot key: wait',
      'Hot key: max wait',
      'Hot key: fewer',
      'Hot key: ≤ 3',
    ].some((t) => missed(t).length > 0);
    if (hotMissed) {
      const churn = ours.map((id) => commandsPerAcq(h.rows[id]!, ['subscribe', 'unsubscribe']));
      const churnValues = { churn: each(churn, (c) => n(c)) };
      const two = level(1);
      out.push(
        prose('analysis', 'hot-key', {
          'ours.redisBusy': each(ours, (id) => pct(util(id, 'redis'))),
          loadStart: n(r.machine.loadStart),
          loadEnd: n(r.machine.loadEnd),
          'ours.clientCpuMs': each(ours, (id) => n(h.rows[id]!.clientCpuPerAcqMs, 2)),
          'ours.clientBusy': each(ours, (id) => pct(util(id, 'client'))),
          'peers.clientCpuMs': each(peers, (id) => n(h.rows[id]!.clientCpuPerAcqMs, 2)),
          peers: each(peers, label),
          'peers.crossProcessShare': each(peers, (id) => pct(h.rows[id]!.crossProcessShare)),
          'peers.waitMax': each(peers, (id) => int(h.rows[id]!.waitMax)),
          'raw.waitMax': int(h.rows.raw?.waitMax),
          'turns.crossProcessShare': turns
            .map((id) =>
              prose('analysis', 'turn-share', { contender: label(id), share: pct(h.rows[id]!.crossProcessShare) }),
            )
            .join('; '),
          'turns.waitMax': each(turns, (id) => int(h.rows[id]!.waitMax)),
          'turns.jain': each(turns, (id) => n(h.rows[id]!.jain, 3)),
          'fair.handoffP50': n(h.rows.fair?.handoffP50),
          twoProcesses: two ? prose('analysis', 'two-processes', { handoffP50: n(two.rows.fair?.handoffP50) }) : '',
          'turns.commandsPerAcq': each(turns, (id) => n(h.rows[id]!.commandsPerAcq)),
          'turns.rate': each(turns, (id) => int(h.rows[id]!.perSecond)),
          'peers.bestRate': int(Math.max(...peers.map((id) => h.rows[id]!.perSecond))),
          'fair.commandsPerAcq': n(h.rows.fair?.commandsPerAcq),
          subscriptions:
            Math.max(...churn) > 0.1
              ? prose('analysis', 'subscription-churn', {
                  ...churnValues,
                  fairAt100: n(level(100)?.rows.fair?.commandsPerAcq),
                })
              : prose('analysis', 'no-subscription-churn', churnValues),
          'peers.commandsAt100': each(peers, (id) => n(level(100)?.rows[id]?.commandsPerAcq)),
          'peers.commandsAt1000': each(peers, (id) => n(level(1000)?.rows[id]?.commandsPerAcq)),
          'ours.commandsAt1000': each(ours, (id) => n(level(1000)?.rows[id]?.commandsPerAcq)),
          'fair.rateAt1000': int(level(1000)?.rows.fair?.perSecond),
          'peers.rateAt1000': each(peers, (id) => int(level(1000)?.rows[id]?.perSecond)),
        }),
        '',
      );
      const fair = h.rows.fair;
      if (fair && peers.length > 0) {
        const best = peers.reduce((a, b) => (h.rows[a]!.perSecond >= h.rows[b]!.perSecond ? a : b));
        const handingOver = peers.filter((id) => h.rows[id]!.crossProcessShare >= 0.01);
        const hogs = peers.filter((id) => h.rows[id]!.crossProcessShare < 0.01);
        out.push(
          prose('analysis', 'fair-against-polling', {
            'fair.crossProcessShare': pct(fair.crossProcessShare),
            'peers.crossHandoffP50': each(peers, (id) => n(h.rows[id]!.crossHandoffP50)),
            'peers.handoffP50': each(peers, (id) => n(h.rows[id]!.handoffP50)),
            'fair.handoffP50': n(fair.handoffP50),
            'fair.handoffRtt': n(fair.handoffP50 / rtt, 1),
            'fair.rate': int(fair.perSecond),
            'fair.shareOfPeers': peers
              .map((id) =>
                prose('analysis', 'share-of-peer', {
                  share: pct(fair.perSecond / h.rows[id]!.perSecond),
                  peer: label(id),
                }),
              )
              .join(', '),
            bestPeer: label(best),
            'fair.clientCpuMs': n(fair.clientCpuPerAcqMs, 2),
            'fair.waitP99': n(fair.waitP99, 1),
            'fair.fifoWaitMs': n((7 / fair.perSecond) * 1000, 1),
            lowerThanHandingOver:
              handingOver.length > 0
                ? prose('analysis', 'lower-than', {
                    ratios: each(handingOver, (id) => `${n(h.rows[id]!.waitP99 / fair.waitP99, 0)}×`),
                    peers: each(handingOver, label),
                    waitP99: each(handingOver, (id) => n(h.rows[id]!.waitP99, 1)),
                  })
                : 'n/a',
            hogs:
              hogs.length > 0
                ? prose('analysis', 'hogs', {
                    peers: each(hogs, label),
                    waitP99: each(hogs, (id) => n(h.rows[id]!.waitP99, 1)),
                    retaken: each(hogs, (id) => pct(1 - h.rows[id]!.crossProcessShare)),
                    waitMax: each(hogs, (id) => int(h.rows[id]!.waitMax)),
                    jain: each(hogs, (id) => n(h.rows[id]!.jain, 3)),
                  })
                : '',
            'fair.waitMax': int(fair.waitMax),
            'fair.jain': n(fair.jain, 3),
          }),
          '',
        );
      }
    }
    if (missed('Hot key: Jain').length > 0) {
      out.push(
        prose('analysis', 'fairness', {
          missed: missed('Hot key: Jain')
            .map((t) =>
              prose('analysis', 'missed-fairness', { lock: label(t.lock), measured: t.measured, bound: t.bound }),
            )
            .join('; '),
        }),
        '',
      );
    }
  }

  const missed1ms = missed('Hot key, 1 ms:');
  const h1 = r.hotKey1ms;
  if (missed1ms.length > 0 && h1) {
    const ours1 = (['reentrant', 'simple'] as const).filter((id) => h1.rows[id]);
    const polling1 = (['redlock', 'redlock-10ms', 'semaphore', 'raw'] as const).filter((id) => h1.rows[id]);
    out.push(
      prose('analysis', 'hot-key-1ms', {
        missed: missed1ms
          .map((t) =>
            prose('analysis', 'missed-1ms', {
              lock: label(t.lock),
              target: t.target.slice('Hot key, 1 ms: '.length),
              measured: t.measured,
              bound: t.bound,
            }),
          )
          .join('; '),
        'ours.crossProcessShare': each(ours1, (id) => pct(h1.rows[id]!.crossProcessShare)),
        'polling.crossProcessShare': each(polling1, (id) => pct(h1.rows[id]!.crossProcessShare)),
        'ours.crossHandoffP50': each(ours1, (id) => n(h1.rows[id]!.crossHandoffP50)),
        'ours.clientCpuMs': each(ours1, (id) => n(h1.rows[id]!.clientCpuPerAcqMs, 2)),
        'polling.clientCpuMs': each(polling1, (id) => n(h1.rows[id]!.clientCpuPerAcqMs, 2)),
      }),
      '',
    );
  }

  const fifoFloor = fifoFloorAnalysis(
    r,
    missed('Hot key: throughput ≥ 0.95').length + missed('Hot key, 1 ms: throughput ≥ 0.95').length > 0,
  );
  if (fifoFloor) out.push(fifoFloor, '');

  if (missed('100 waiters').length > 0 && w) {
    out.push(
      prose('analysis', 'hundred-waiters', {
        missed: missed('100 waiters')
          .map((t) =>
            prose('analysis', 'missed-100-waiters', { lock: label(t.lock), measured: t.measured, bound: t.bound }),
          )
          .join('; '),
      }),
      '',
    );
  }
  const hundred = level(100);
  if (hundred?.rows.fair && hundred.rows.reentrant) {
    const polling = ['redlock', 'redlock-10ms', 'semaphore', 'raw'] as const;
    const reentrantBound = hundred.processes + 4;
    out.push(
      prose('analysis', 'counting-inside-lua', {
        fair: n(hundred.rows.fair.executedPerAcq, 1),
        reentrant: n(hundred.rows.reentrant.executedPerAcq, 1),
        reentrantBound: String(reentrantBound),
        bothMissed:
          hundred.rows.fair.executedPerAcq > 5 && hundred.rows.reentrant.executedPerAcq > reentrantBound
            ? prose('analysis', 'both-missed')
            : '',
        pollingAt100: each(polling, (id) => n(hundred.rows[id]?.executedPerAcq, 1)),
        pollingAt1000: each(polling, (id) => n(level(1000)?.rows[id]?.executedPerAcq, 1)),
      }),
      '',
    );
  }
  if (missed('Watchdog').length > 0 && r.watchdog) {
    out.push(
      prose('analysis', 'watchdog', { roundTrips: n(r.watchdog.roundTrips, 0), locks: String(r.watchdog.locks) }),
      '',
    );
  }
  if (out.length === 2) out.push(prose('analysis', 'all-met'), '');
  return out.join('\n');
}

function findingsSection(r: BenchResults): string {
  const h = r.hotKey;
  const w = r.waiters;
  const wd = r.watchdog;
  const fairHot = h?.rows.fair;
  const fair100 = w?.levels.find((l) => l.waiters === 100)?.rows.fair;
  const lines = [prose('findings', 'heading'), ''];
  const s = r.startup;
  if (s) {
    lines.push(
      prose('findings', 'pubsub-subscription', {
        forcedStalled: String(s.forced.stalled),
        forcedTrials: String(s.forced.trials),
        naturalStalled: String(s.natural.stalled),
        naturalTrials: String(s.natural.trials),
        serverSubscribers: (s.forced.serverSubscribers ?? []).join(', '),
      }),
    );
  }
  const fairChurn = fairHot && h ? commandsPerAcq(h.rows.fair!, ['subscribe', 'unsubscribe']) : 0;
  if (fairHot && fair100 && fairChurn > 0.1) {
    lines.push(
      prose('findings', 'subscription-churn', {
        churn: n(fairChurn),
        commandsPerAcq: n(fairHot.commandsPerAcq),
        commandsAt100: n(fair100.commandsPerAcq),
      }),
    );
  }
  if (h?.rows.reentrant) {
    lines.push(
      prose('findings', 'one-wake-up', {
        commandsPerAcq: n(h.rows.reentrant.commandsPerAcq),
        crossProcessShare: pct(h.rows.reentrant.crossProcessShare),
        jain: n(h.rows.reentrant.jain, 3),
      }),
    );
  }
  if (wd) {
    lines.push(
      prose('findings', 'renewal-cpu', {
        clientCpuMs: n(wd.clientCpuMs, 0),
        redisCpuMs: n(wd.redisCpuMs, 0),
        locks: wd.locks.toLocaleString('en-US'),
      }),
    );
  }
  return lines.join('\n');
}

/** Semaphores and the read lock: several holders at once. */
function sharedSection(s: SharedResult): string {
  const ids = (Object.keys(s.rows) as ContenderId[]).filter((id) => s.rows[id]);
  const rate = (id: ContenderId) => s.rows[id]?.perSecond ?? NaN;
  const ratio = (a: ContenderId, b: ContenderId) =>
    Number.isFinite(rate(a) / rate(b)) ? `${n(rate(a) / rate(b))} ×` : 'n/a';
  return prose('shared', 'section', {
    processes: String(s.processes),
    sectionMs: String(s.sectionMs),
    windowS: String(s.windowMs / 1000),
    table: table(
      [
        'Contender',
        'limit',
        'acquisitions / s',
        'wait p50 ms',
        'wait p99 ms',
        'max inside',
        'over the limit',
        'commands / acq.',
        'client CPU / acq. µs',
      ],
      ids.map((id) => {
        const r = s.rows[id]!;
        return [
          label(id),
          r.limit === undefined ? 'all' : String(r.limit),
          int(r.perSecond),
          n(r.waitP50, 1),
          n(r.waitP99, 1),
          String(r.maxInside),
          String(r.lostUpdates),
          n(r.commandsPerAcq),
          int(r.clientCpuPerAcqMs * 1000),
        ];
      }),
    ),
    semaphoreRatio: ratio('permits', 'rs-semaphore'),
    readRatio: ratio('read', 'reentrant'),
  });
}

/** Ours with its OpenTelemetry instrumentation (no SDK registered) against the same lock with `telemetry: false`. */
function instrumentationSection(r: BenchResults): string | undefined {
  const rows: string[][] = [];
  const add = (what: string, on: number | undefined, off: number | undefined, show: (v: number) => string) => {
    if (on === undefined || off === undefined) return;
    rows.push([what, show(on), show(off), `${n(on / off)} ×`]);
  };
  const u = r.uncontended?.rows;
  add('uncontended acquire p50, µs', u?.reentrant?.acquireP50, u?.['reentrant-no-otel']?.acquireP50, us);
  add('uncontended release p50, µs', u?.reentrant?.releaseP50, u?.['reentrant-no-otel']?.releaseP50, us);
  add(
    'uncontended client CPU per acquire + release, µs',
    u?.reentrant?.clientCpuUs,
    u?.['reentrant-no-otel']?.clientCpuUs,
    int,
  );
  for (const [title, hot] of [
    ['hot key', r.hotKey],
    ['hot key, 1 ms', r.hotKey1ms],
  ] as const) {
    add(`${title}: acquisitions / s`, hot?.rows.reentrant?.perSecond, hot?.rows['reentrant-no-otel']?.perSecond, int);
    add(
      `${title}: client CPU per acquisition, µs`,
      hot?.rows.reentrant && hot.rows.reentrant.clientCpuPerAcqMs * 1000,
      hot?.rows['reentrant-no-otel'] && hot.rows['reentrant-no-otel'].clientCpuPerAcqMs * 1000,
      int,
    );
  }
  if (rows.length === 0) return undefined;
  return prose('instrumentation', 'section', {
    table: table(['Measure', 'telemetry on (default)', 'telemetry off', 'on / off'], rows),
  });
}

// ---------------------------------------------------------------------------------------------

export function renderMarkdown(r: BenchResults): string {
  const ids = r.config.contenders;
  const targets = evaluateTargets(r);
  const sections = [header(r), targetsSection(targets)];
  if (r.uncontended) sections.push(uncontendedSection(r.uncontended, ids));
  if (r.parallel) sections.push(parallelSection(r.parallel, ids));
  const rtt = r.uncontended?.rttMs ?? NaN;
  if (r.hotKey)
    sections.push(
      hotKeySection(r.hotKey, ids, rtt, {
        title: prose('hot-key', 'hot-title'),
        criticalSection: prose('hot-key', 'hot-critical-section'),
        warmupGrants: r.config.warmupGrantsPerProcess,
        warmupMaxWindows: r.config.warmupMaxWindows,
      }),
    );
  if (r.hotKey1ms) {
    const ms = String(r.hotKey1ms.sectionMs ?? r.config.hot1msSectionMs);
    sections.push(
      hotKeySection(r.hotKey1ms, ids, rtt, {
        title: prose('hot-key', '1ms-title', { ms }),
        criticalSection: prose('hot-key', '1ms-critical-section', { ms }),
        warmupGrants: r.config.hot1msWarmupGrantsPerProcess,
        warmupMaxWindows: r.config.hot1msWarmupMaxWindows,
      }),
    );
  }
  if (r.shared) sections.push(sharedSection(r.shared));
  if (r.waiters) sections.push(waitersSection(r.waiters, contendersFor(ids, 'locks')));
  const overhead = instrumentationSection(r);
  if (overhead) sections.push(overhead);
  if (r.watchdog) sections.push(watchdogSection(r.watchdog));
  if (r.startup) sections.push(startupSection(r.startup));
  if (r.failover) sections.push(failoverSection(r.failover));
  if (r.names) sections.push(manyNamesSection(r.names));
  sections.push(analysis(r, targets), findingsSection(r));
  sections.push(
    prose('reproduce', 'section', {
      polling: [...POLLING].map(label).join(', '),
      rawResults: r.complete ? 'docs/benchmarks.json' : 'bench/out/results.json',
    }),
  );
  return sections.join('\n\n') + '\n';
}

/** Writes benchmarks.md (and benchmarks.svg when there is a hot-key result) into `outDir`. */
export async function writeReport(results: BenchResults, outDir: string): Promise<string[]> {
  fs.mkdirSync(outDir, { recursive: true });
  const written: string[] = [];
  const md = path.join(outDir, 'benchmarks.md');
  fs.writeFileSync(md, await formatLikeRepo(renderMarkdown(results), md));
  written.push(md);
  const svg = renderSvg(results);
  if (svg) {
    const file = path.join(outDir, 'benchmarks.svg');
    fs.writeFileSync(file, svg);
    written.push(file);
  }
  return written;
}
