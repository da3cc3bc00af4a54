/** Small statistics helpers shared by every scenario. Inputs are never mutated. */

/** Nearest-rank percentile (p in 0..100) of `values`; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return NaN;
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function max(values: readonly number[]): number {
  let m = -Infinity;
  for (const v of values) if (v > m) m = v;
  return values.length === 0 ? NaN : m;
}

export function sum(values: readonly number[]): number {
  let s = 0;
  for (const v of values) s += v;
  return s;
}

/**
 * Jain's fairness index of per-participant allocations: (Σx)² / (n·Σx²). 1 = perfectly even,
 * 1/n = one participant got everything.
 */
export function jain(allocations: readonly number[]): number {
  const n = allocations.length;
  const squares = sum(allocations.map((x) => x * x));
  if (n === 0 || squares === 0) return NaN;
  return sum(allocations) ** 2 / (n * squares);
}

/** For each key, the median over rounds of that key's value. */
export function medianOfRounds<T extends { [K in keyof T]: number }>(rounds: readonly T[]): T {
  const out = {} as T;
  if (rounds.length === 0) return out;
  for (const key of Object.keys(rounds[0]) as (keyof T)[]) {
    out[key] = median(rounds.map((r) => r[key])) as T[keyof T];
  }
  return out;
}
