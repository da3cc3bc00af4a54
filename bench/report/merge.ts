import { CONTENDER_IDS, type ContenderId } from '../lib/contenders';
import type { BenchResults } from './markdown';

/**
 * The many-names scenario is run by itself (`--only=names`): it carries its own sizes and date, so its
 * result can join the published report of another run. `into` gets `from`'s result, marked as
 * measured by a run of its own on `from`'s machine, and the contenders it measured join
 * `config.contenders` (for the report's list of contenders), in their usual order.
 */
export function mergeManyNames(into: BenchResults, from: BenchResults): BenchResults {
  const names = from.names;
  if (!names) throw new Error('no many-names result to merge (run with --only=names first)');
  const m = from.machine;
  const merged: BenchResults = {
    ...into,
    names: {
      ...names,
      separateRun: names.separateRun ?? {
        machine: `${m.cpuModel}, ${m.cores} cores, ${m.os}, Node ${m.node}, Redis ${m.redis}`,
        pinning: from.pinning.description,
      },
    },
  };
  const measured = new Set<ContenderId>([...into.config.contenders, ...(Object.keys(names.rows) as ContenderId[])]);
  merged.config = { ...into.config, contenders: CONTENDER_IDS.filter((id) => measured.has(id)) };
  return merged;
}
