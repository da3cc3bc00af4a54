import { CONTENDER_CONFIG } from '../../lib/contenders';
import { median } from '../../lib/stats';
import { n, pct, table } from '../cells';
import { prose } from '../prose';
import { type TargetRow } from '../targets';
import type { BenchResults } from '../results';
import { label } from './common';

/** How far the client-side count of sent commands strays from commandstats' top-level count, for the method note. */
export function crossCheck(r: BenchResults): string {
  const pairs: [number, number][] = [];
  for (const hot of [r.hotKey, r.hotKey1ms])
    for (const row of Object.values(hot?.rows ?? {})) if (row) pairs.push([row.sentPerAcq, row.commandsPerAcq]);
  for (const level of r.waiters?.levels ?? [])
    for (const row of Object.values(level.rows)) if (row) pairs.push([row.sentPerAcq, row.commandsPerAcq]);
  const deviations = pairs.filter(([, c]) => c > 0).map(([sent, c]) => Math.abs(sent - c) / c);
  if (deviations.length === 0) return '';
  return prose('header', 'cross-check', { median: pct(median(deviations)), worst: pct(Math.max(...deviations)) });
}

export function header(r: BenchResults): string {
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
          `${r.config.rounds} (uncontended, parallel, hot keys, RedLock), ${r.config.waitersRounds} (many waiters); contenders interleaved A B C … then again, tables show the median over rounds`,
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

export function targetsSection(rows: TargetRow[]): string {
  const judged = rows.filter((t) => t.notJudged === undefined);
  const unjudged = rows.length - judged.length;
  return prose('targets', 'section', {
    met: String(judged.filter((t) => t.met).length),
    total: String(judged.length),
    notJudged:
      unjudged === 0
        ? ''
        : prose('targets', 'not-judged', { count: unjudged === 1 ? 'one more row' : `${unjudged} more rows` }),
    table: table(
      ['Target', 'Lock', 'Measured', 'Bound', 'Result'],
      rows.map((t) => [
        t.target,
        label(t.lock),
        t.measured,
        t.bound,
        t.notJudged !== undefined ? `not judged: ${t.notJudged}` : t.met ? 'met' : '**missed**',
      ]),
      ['l', 'l', 'r', 'l', 'l'],
    ),
  });
}
