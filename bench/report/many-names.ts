import { CONTENDER_IDS, CONTENDER_LABELS, type ContenderId } from '../lib/contenders';
import type { KeyGroup } from '../lib/keyspace';
import { NAMES_POINTS, type ManyNamesResult, type NamesPoint, type NamesSample } from '../scenarios/many-names';
import { int, n, table } from './cells';
import { prose } from './prose';

/** "Many names, once each": what locking many distinct names leaves in Redis, contender by contender. */

const MIB = 2 ** 20;
const seconds = (ms: number): string => n(ms / 1000, 0);
const ttl = (group: KeyGroup): string => (group.maxTtlMs === undefined ? 'none' : n(group.maxTtlMs / 1000, 1));

function pointTitles(r: ManyNamesResult): Record<NamesPoint, string> {
  return {
    before: 'before',
    run: 'after the run',
    lease: `after the leases (${seconds(r.leaseAtMs)} s)`,
    idle: `after the idle period (${seconds(r.idleAtMs)} s)`,
  };
}

export function manyNamesSection(r: ManyNamesResult): string {
  const ids = CONTENDER_IDS.filter((id) => r.rows[id]);
  const titles = pointTitles(r);
  const matrix = (cell: (sample: NamesSample) => string): string =>
    table(
      ['Contender', ...NAMES_POINTS.map((p) => titles[p])],
      ids.map((id) => [CONTENDER_LABELS[id], ...NAMES_POINTS.map((p) => cell(r.rows[id]!.samples[p]))]),
    );
  const perName = (id: ContenderId, point: NamesPoint): string => {
    const { samples } = r.rows[id]!;
    // Below a byte a name is none (Redis's own allocations move by a few KiB between samples): never "-0".
    return int(Math.max(0, Math.round((samples[point].usedMemory - samples.before.usedMemory) / r.names)));
  };
  const memoryTable = table(
    [
      'Contender',
      'names / s',
      ...NAMES_POINTS.map((p) => titles[p]),
      'bytes per name after the run',
      'after the idle period',
    ],
    ids.map((id) => {
      const row = r.rows[id]!;
      return [
        CONTENDER_LABELS[id],
        int(row.perSecond),
        ...NAMES_POINTS.map((p) => n(row.samples[p].usedMemory / MIB, 1)),
        perName(id, 'run'),
        perName(id, 'idle'),
      ];
    }),
  );
  const separate = r.separateRun;
  return prose('names', 'section', {
    names: int(r.names),
    inFlight: String(r.inFlight),
    leaseAtS: seconds(r.leaseAtMs),
    idleAtS: seconds(r.idleAtMs),
    idleKeyTtlMs: String(r.idleKeyTtlMs),
    recordMemoryS: seconds(r.recordMemoryMs),
    measured: separate
      ? prose('names', 'separate-run', {
          date: r.date.slice(0, 10),
          durationS: n(r.durationS, 0),
          machine: separate.machine,
          pinning: separate.pinning,
        })
      : prose('names', 'measured', { date: r.date.slice(0, 10), durationS: n(r.durationS, 0) }),
    memoryTable,
    keysTable: matrix((s) => int(s.dbsize)),
    noTtlTable: matrix((s) => int(s.noTtl)),
    ttlTable: matrix(ttl),
    shapesTable: shapesTable(r, ids, titles),
    leftBehind: leftBehind(r, ids),
  });
}

/** One row per contender and key shape seen after the run: live keys (no TTL) at each point. */
function shapesTable(r: ManyNamesResult, ids: ContenderId[], titles: Record<NamesPoint, string>): string {
  const later = NAMES_POINTS.filter((p) => p !== 'before');
  const rows = ids.flatMap((id) => {
    const { samples } = r.rows[id]!;
    const shapes = [...new Set(later.flatMap((p) => Object.keys(samples[p].shapes)))].sort();
    if (shapes.length === 0) return [[CONTENDER_LABELS[id], 'none', ...later.map(() => '0')]];
    return shapes.map((shape) => [
      CONTENDER_LABELS[id],
      `\`${shape}\``,
      ...later.map((p) => {
        const group = samples[p].shapes[shape];
        return group ? `${int(group.keys)} (${int(group.noTtl)})` : '0';
      }),
    ]);
  });
  return table(['Contender', 'key', ...later.map((p) => titles[p])], rows, [
    'l',
    'l',
    ...later.map(() => 'r' as const),
  ]);
}

function leftBehind(r: ManyNamesResult, ids: ContenderId[]): string {
  const left = ids.filter((id) => r.rows[id]!.samples.idle.keys > 0);
  if (left.length === 0) return prose('names', 'nothing-left');
  return prose('names', 'left-behind', {
    left: left
      .map((id) => {
        const idle = r.rows[id]!.samples.idle;
        return prose('names', 'left-item', {
          contender: CONTENDER_LABELS[id],
          keys: int(idle.keys),
          noTtl: int(idle.noTtl),
        });
      })
      .join('; '),
  });
}
