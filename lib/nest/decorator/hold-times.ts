import type { LockSpec } from './lock-spec';

/**
 * How long each decorated handler has typically held its lock in this process (a moving average of
 * its recent holds): the best guess of how long a refused client should wait before trying again.
 * Other instances run the same handlers, so this process's holds stand for theirs.
 */
const typical = new WeakMap<LockSpec, number>();

/** Weight of the newest hold in the average: recent holds count most, one outlier does not dominate. */
const NEWEST_WEIGHT = 0.2;

export function recordHoldTime(spec: LockSpec, ms: number): void {
  const previous = typical.get(spec);
  typical.set(spec, previous === undefined ? ms : previous + NEWEST_WEIGHT * (ms - previous));
}

export function typicalHoldTime(spec: LockSpec): number | undefined {
  return typical.get(spec);
}
