import { LockOptionsError } from './errors';
import { MAX_TIMER_MS } from './long-timer';

/**
 * The one rule for every duration the library accepts (engine, Nest options, decorator, environment):
 * a number of milliseconds, fractions rounded UP to a whole millisecond (a lease or a wait is never
 * shorter than asked), within a ceiling that no timer and no Redis command can overflow. Anything
 * else (a string, NaN, a negative or oversized value) is a LockOptionsError naming the option and the
 * value, raised before any Redis call.
 */

/** Leases and waits: up to 365 days (PEXPIRE takes far more; our timers re-arm past setTimeout's limit). */
export const MAX_LEASE_MS = 365 * 24 * 60 * 60 * 1000;

/** Timeouts and intervals (operation, watchdog, acceptance, stale-waiter, replica sync, shutdown): setTimeout's limit, ~24.8 days. */
export const MAX_TIMEOUT_MS = MAX_TIMER_MS;

export interface DurationRule {
  /** 0 is refused (a lease or a timeout of nothing). */
  positive?: boolean;
  /** `Infinity` is accepted ("no limit"). */
  infinite?: boolean;
  /** 'watchdog' is accepted (named in the message only; callers handle the value). */
  watchdog?: boolean;
  /** Ceiling in ms; default MAX_TIMEOUT_MS. */
  max?: number;
}

/** What is wrong with `value` as the duration `field`, or undefined when it is acceptable (or omitted). */
export function durationProblem(field: string, value: unknown, rule: DurationRule = {}): string | undefined {
  if (value === undefined) return undefined;
  const max = rule.max ?? MAX_TIMEOUT_MS;
  if (typeof value === 'number' && !Number.isNaN(value)) {
    if (value === Infinity && rule.infinite) return undefined;
    if (value <= max && (rule.positive ? value > 0 : value >= 0)) return undefined;
  }
  const alternatives = [rule.infinite ? 'Infinity' : '', rule.watchdog ? "'watchdog'" : ''].filter(Boolean);
  return (
    `${field} must be a number of milliseconds ${rule.positive ? '> 0' : '>= 0'} and <= ${max}` +
    `${alternatives.length > 0 ? ` (or ${alternatives.join(' or ')})` : ''}, got ${show(value)}`
  );
}

/** Whole milliseconds: a fraction rounds up. */
export function wholeMilliseconds(value: number): number {
  return value === Infinity ? value : Math.ceil(value);
}

/**
 * Checks a duration option and returns it in whole milliseconds (undefined stays undefined).
 * @throws LockOptionsError naming `field` and the value
 */
export function checkDuration(key: string | undefined, field: string, value: unknown, rule: DurationRule = {}) {
  const problem = durationProblem(field, value, rule);
  if (problem) throw new LockOptionsError(`${problem}.`, key || undefined, { option: field, value });
  return value === undefined ? undefined : wholeMilliseconds(value as number);
}

export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}
