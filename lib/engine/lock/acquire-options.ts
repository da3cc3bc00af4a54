import { assertOptionsObject, checkDuration, labelProblem, LEASE_RULE, show, WAIT_RULE } from '../util/validation';
import { LockOptionsError } from '../errors';

/** Options accepted when acquiring a lock. Times are in milliseconds (fractions round up; see validation.ts). */
export interface AcquireOptions {
  /**
   * How long the lock lives unless renewed, at most 365 days. Omitted: the watchdog keeps renewing a
   * `watchdogTimeout`-long lease while the holder lives. Given: no watchdog, the lock simply expires.
   */
  leaseTime?: number;
  /** How long to wait for a held lock, at most 365 days. 0 = a single attempt. Omitted in `lock()`: wait indefinitely. */
  waitTime?: number;
  /** Gives up waiting (rejecting with the signal's reason) when aborted. */
  signal?: AbortSignal;
  /**
   * An explicit owner id, for code that acquires in one place and releases in another (another
   * request, another process). Omitted: the current lock scope's owner.
   */
  owner?: string;
  /**
   * A bounded name for this acquisition in events and metrics (the `lock.name` attribute), such as
   * the key template `order:{params.id}` that `@DistributedLock` passes. Never the raw lock name by
   * default: one time series per order id would swamp a metrics backend.
   */
  label?: string;
}

/** AcquireOptions as the engine uses them: checked, times in whole milliseconds. */
export interface CheckedAcquireOptions extends AcquireOptions {
  readonly checked: true;
}

/**
 * Checks acquisition options before any Redis call and returns them with whole-millisecond times.
 * @throws LockOptionsError naming the option and its value
 */
export function checkAcquireOptions(
  key: string,
  options: AcquireOptions,
  /** The waitTime when none is given (tryLock: 0, one attempt). */
  defaultWaitTime?: number,
): CheckedAcquireOptions {
  assertOptionsObject(key, options);
  const leaseTime = checkDuration(key, 'leaseTime', options.leaseTime, LEASE_RULE);
  const waitTime = checkDuration(key, 'waitTime', options.waitTime, WAIT_RULE) ?? defaultWaitTime;
  const { owner, signal } = options;
  if (owner !== undefined && (typeof owner !== 'string' || owner.length === 0 || owner.includes('\0'))) {
    throw new LockOptionsError(`owner must be a non-empty string without NUL characters, got ${show(owner)}.`, key, {
      option: 'owner',
      value: owner,
    });
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new LockOptionsError(`signal must be an AbortSignal, got ${show(signal)}.`, key, {
      option: 'signal',
      value: signal,
    });
  }
  const { label } = options;
  const problem = labelProblem(label);
  if (problem) throw new LockOptionsError(`${problem}.`, key, { option: 'label', value: label });
  // Written out, not `{ ...options, leaseTime, waitTime }`: a spread that overrides a copied field
  // leaves V8's fast path, costing about a microsecond per acquisition.
  return { leaseTime, waitTime, signal, owner, label, checked: true };
}

/** Throws like checkAcquireOptions (for callers that pass the options on unchanged). */
export function assertAcquireOptions(key: string, options: AcquireOptions): void {
  checkAcquireOptions(key, options);
}
