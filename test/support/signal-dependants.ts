/**
 * The signals `AbortSignal.any` made from `signal` that it still references: Node keeps them in a set
 * on the source signal, made at its first use (Node 20 never empties it, whether or not they were
 * collected). 0 when there is no such set: check with `anyKeepsDependants` first that this Node has
 * one, or a test would prove nothing.
 */
export function dependants(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  return key === undefined ? 0 : (signal as unknown as Record<symbol, Set<unknown>>)[key].size;
}

/** Whether `dependants` sees what AbortSignal.any keeps on this Node. */
export function anyKeepsDependants(): boolean {
  const probe = new AbortController().signal;
  const kept = [AbortSignal.any([probe]), AbortSignal.any([probe])];
  return dependants(probe) === kept.length;
}
