import { type ContenderId } from '../../lib/contenders';
import type { ParallelResult } from '../../scenarios/parallel';
import type { UncontendedResult } from '../../scenarios/uncontended';
import { int, n, table, us } from '../cells';
import { prose } from '../prose';
import { label } from './common';

export function uncontendedSection(u: UncontendedResult, ids: ContenderId[]): string {
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

export function parallelSection(p: ParallelResult, ids: ContenderId[]): string {
  return prose('parallel', 'section', {
    keys: String(p.keys),
    durationS: String(p.durationMs / 1000),
    table: table(
      ['Contender', 'acquisitions / s'],
      ids.filter((id) => p.rows[id]).map((id) => [label(id), int(p.rows[id]!.perSecond)]),
    ),
  });
}
