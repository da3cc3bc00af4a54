import { type ContenderId } from '../../lib/contenders';
import type { FailoverResult, FailoverRow } from '../../scenarios/failover';
import { int, table } from '../cells';
import { prose } from '../prose';
import { label } from './common';

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

export function failoverSection(f: FailoverResult): string {
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

// Analysis: what limits each missed target, with the numbers of this run.
