import { CONTENDER_LABELS, type ContenderId } from '../../lib/contenders';
import { median } from '../../lib/stats';
import type { HotKeyRow } from '../../scenarios/hot-key';

export const label = (id: ContenderId): string => CONTENDER_LABELS[id];

/** Values of several contenders, as the prose lists them: "1.56 / 1.83 / 1.78". */
export const each = <T>(ids: readonly T[], value: (id: T) => string): string => ids.map(value).join(' / ');

/** Sum of the given commands' per-acquisition counts over a row's rounds, median over rounds. */
export function commandsPerAcq(row: HotKeyRow, names: string[]): number {
  return median(row.rounds.map((m) => names.reduce((s, name) => s + (m.executedByCommand[name] ?? 0), 0)));
}
