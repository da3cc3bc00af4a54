import { type ContenderId } from '../../lib/contenders';
import type { WaitersResult } from '../../scenarios/many-waiters';
import { int, n, table } from '../cells';
import { prose } from '../prose';
import { label } from './common';

export function waitersSection(w: WaitersResult, ids: ContenderId[]): string {
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
