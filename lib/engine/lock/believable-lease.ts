import { LockOptionsError } from '../errors';
import { leaseEnd } from '../util/clock';

/**
 * Refuses a lease the holder could never count on: the drift margin it gives up (see leaseEnd) takes
 * all of it, so every grant of it would come too late (see LockAcquisition.grantedTooLate). Checked
 * before Redis is asked. `given`: the value as the caller passed it (before rounding).
 */
export function assertBelievableLease(
  name: string,
  leaseTime: number | undefined,
  given: unknown,
  driftFactor: number,
): void {
  if (leaseTime === undefined || leaseEnd(0, leaseTime, driftFactor) > 0) return;
  throw new LockOptionsError(
    `leaseTime ${leaseTime} ms is too short to be held: the margin the holder gives up to clock drift takes all ` +
      `of it, so any grant would be over before its reply arrived. Give a longer lease.`,
    name,
    { option: 'leaseTime', value: given },
  );
}
