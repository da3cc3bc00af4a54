import { type ContenderId } from '../../lib/contenders';
import type { SharedResult } from '../../scenarios/shared';
import { int, n, table, us } from '../cells';
import { prose } from '../prose';
import type { BenchResults } from '../results';
import { label } from './common';

/** Semaphores and the read lock: several holders at once. */
export function sharedSection(s: SharedResult): string {
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
        'Jain',
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
          n(r.jain, 3),
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
export function instrumentationSection(r: BenchResults): string | undefined {
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
