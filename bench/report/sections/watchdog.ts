import type { StartupResult } from '../../scenarios/startup';
import type { WatchdogResult } from '../../scenarios/watchdog';
import { int, n, table } from '../cells';
import { prose } from '../prose';

export function watchdogSection(wd: WatchdogResult): string {
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

export function startupSection(s: StartupResult): string {
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
