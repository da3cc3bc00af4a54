import { LockOptionsError } from './errors';

/** Options accepted when acquiring a lock. Times are in milliseconds. */
export interface AcquireOptions {
  /**
   * How long the lock lives unless renewed. Omitted: the watchdog keeps renewing a
   * `watchdogTimeout`-long lease while the holder lives. Given: no watchdog, the lock simply expires.
   */
  leaseTime?: number;
  /** How long to wait for a held lock. 0 = a single attempt. Omitted in `lock()`: wait indefinitely. */
  waitTime?: number;
  /** Gives up waiting (rejecting with the signal's reason) when aborted. */
  signal?: AbortSignal;
  /**
   * An explicit owner id, for code that acquires in one place and releases in another (another
   * request, another process). Omitted: the current lock scope's owner.
   */
  owner?: string;
}

/** Throws LockOptionsError unless `value` is a finite, non-negative number of milliseconds (or undefined). */
export function assertDuration(key: string, field: string, value: unknown, { positive = false } = {}): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (positive && value === 0)) {
    throw new LockOptionsError(
      `${field} must be a finite ${positive ? 'positive' : 'non-negative'} number of milliseconds, got ${String(value)}.`,
      key,
    );
  }
}

export function assertAcquireOptions(key: string, options: AcquireOptions): void {
  assertDuration(key, 'leaseTime', options.leaseTime, { positive: true });
  assertDuration(key, 'waitTime', options.waitTime);
  if (options.owner !== undefined && (typeof options.owner !== 'string' || options.owner.length === 0)) {
    throw new LockOptionsError(`owner must be a non-empty string, got ${String(options.owner)}.`, key);
  }
}
