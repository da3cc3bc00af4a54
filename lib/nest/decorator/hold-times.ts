import type { LockSpec } from './lock-spec';

/** Weight of the newest hold in the average: recent holds count most, one outlier does not dominate. */
const NEWEST_WEIGHT = 0.2;

/**
 * How long each decorated handler has typically held its lock in this application (a moving average
 * of its recent holds): the best guess of how long a refused client should wait before trying again.
 * Other instances run the same handlers, so this process's holds stand for theirs.
 */
export class HoldTimes {
  private readonly typical = new WeakMap<LockSpec, number>();

  record(spec: LockSpec, ms: number): void {
    const previous = this.typical.get(spec);
    this.typical.set(spec, previous === undefined ? ms : previous + NEWEST_WEIGHT * (ms - previous));
  }

  typicalOf(spec: LockSpec): number | undefined {
    return this.typical.get(spec);
  }
}
