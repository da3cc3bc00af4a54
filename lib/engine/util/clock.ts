import { performance } from 'node:perf_hooks';

/**
 * The clock of every local deadline and elapsed time (leases, waits, timeouts, turns): monotonic, so a
 * step of the wall clock (NTP, a VM resumed) moves none of them. Milliseconds from an arbitrary
 * origin: never compare it with Date.now(), which stays for what is shown as a date (spans, events).
 */
export function monotonicNow(): number {
  return performance.now();
}

/** Default share of a lease a holder gives up to clock drift (Redlock's rule), plus DRIFT_FIXED_MS. */
export const DEFAULT_DRIFT_FACTOR = 0.01;
const DRIFT_FIXED_MS = 2;

/**
 * When a lease of `leaseMs` set by a command sent at `sentAt` (monotonicNow) must be taken for over
 * on this side: a drift margin (`driftFactor` of the lease + 2 ms) before Redis lets it run out, so
 * that a client clock running slow against Redis's, or a late timer, never leaves a holder believing
 * after another was granted the lock.
 */
export function leaseEnd(sentAt: number, leaseMs: number, driftFactor: number): number {
  return sentAt + leaseMs - Math.round(leaseMs * driftFactor) - DRIFT_FIXED_MS;
}
