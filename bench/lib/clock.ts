/**
 * Monotonic time in milliseconds with sub-microsecond resolution. process.hrtime reads
 * CLOCK_MONOTONIC, which is system-wide on Linux, so values taken in different processes on the same
 * machine can be subtracted (the hot-key hand-off is measured that way).
 */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
