import { LockOptionsError } from '../errors';
import { MAX_TIMER_MS } from './long-timer';

/**
 * The rules for every value a caller hands the library (engine options, Nest options and decorator,
 * environment variables), each written once. A `…Problem` function says what is wrong with a value
 * (undefined when it is acceptable or omitted), for callers that collect every problem before
 * failing; a `check…` / `assert…` function throws it as a LockOptionsError naming the option and the
 * value, before any Redis call.
 */

// ---- Durations --------------------------------------------------------------------------------
// A number of milliseconds, fractions rounded UP to a whole millisecond (a lease or a wait is never
// shorter than asked), within a ceiling that no timer and no Redis command can overflow.

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

/** A lease (`leaseTime` wherever it is given): > 0, up to 365 days. */
export const LEASE_RULE: DurationRule = { positive: true, max: MAX_LEASE_MS };
/** A wait (`waitTime` wherever it is given): 0 means one attempt, up to 365 days. */
export const WAIT_RULE: DurationRule = { max: MAX_LEASE_MS };
/** RedLock's `restartQuarantine`: 0 (off) up to the longest lease. */
export const RESTART_QUARANTINE_RULE: DurationRule = { max: MAX_LEASE_MS };
/** A timeout or an interval (`operationTimeout`, `watchdogTimeout`, `commandTimeout`, …): > 0. */
export const TIMEOUT_RULE: DurationRule = { positive: true };

/** `idleKeyTtl`: at most a day, so what a name leaves behind is bounded ("hours at most"). */
export const IDLE_KEY_TTL_RULE: DurationRule = { positive: true, max: 86_400_000 };

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

// ---- Option objects -----------------------------------------------------------------------------

/**
 * Throws LockOptionsError (naming `key`) unless `options` is an object. Every call that takes an
 * options object checks this first: `null`, a number or a string would otherwise surface as a
 * TypeError from deep inside, or be silently ignored.
 */
export function assertOptionsObject(key: string, options: unknown): asserts options is object {
  if (options === null || typeof options !== 'object') {
    throw new LockOptionsError(`Lock options must be an object, got ${show(options)}.`, key);
  }
}

// ---- Names and the key prefix -------------------------------------------------------------------

/** Longest lock name accepted, in bytes: longer names are almost always a bug (a body used as a key). */
export const MAX_NAME_BYTES = 1024;

/** Throws LockOptionsError unless `name` is a usable lock name. */
export function assertLockName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new LockOptionsError(`Lock name must be a non-empty string, got ${show(name)}.`, String(name));
  }
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new LockOptionsError(
      `Lock name is ${Buffer.byteLength(name)} bytes; the limit is ${MAX_NAME_BYTES}. Use a shorter, stable identifier.`,
      name.slice(0, 64) + '…',
    );
  }
}

/**
 * What is wrong with `prefix` as the namespace of every key (braces would move the hash tag), or
 * undefined when it is acceptable or omitted (the client then uses 'lock').
 */
export function keyPrefixProblem(field: string, prefix: unknown): string | undefined {
  if (prefix === undefined) return undefined;
  return isKeyPrefix(prefix) ? undefined : keyPrefixMessage(field, prefix);
}

/** Throws LockOptionsError unless `prefix` can namespace keys without disturbing the hash tag. */
export function assertKeyPrefix(prefix: unknown): asserts prefix is string {
  if (isKeyPrefix(prefix)) return;
  throw new LockOptionsError(`${keyPrefixMessage('keyPrefix', prefix)}.`, undefined, {
    option: 'keyPrefix',
    value: prefix,
  });
}

function isKeyPrefix(prefix: unknown): prefix is string {
  return typeof prefix === 'string' && prefix.length > 0 && !/[{}]/.test(prefix);
}

function keyPrefixMessage(field: string, prefix: unknown): string {
  return `${field} must be a non-empty string without "{" or "}", got ${show(prefix)}`;
}

// ---- Labels -------------------------------------------------------------------------------------

/** Longest `label` (an acquisition's name in events and metrics): a template, not data. */
export const MAX_LABEL_LENGTH = 200;

/** What is wrong with `label`, or undefined when it is acceptable or omitted. */
export function labelProblem(label: unknown): string | undefined {
  if (label === undefined) return undefined;
  if (typeof label === 'string' && label.length > 0 && label.length <= MAX_LABEL_LENGTH) return undefined;
  return `label must be a string of 1-${MAX_LABEL_LENGTH} characters, got ${show(label)}`;
}

// ---- Messages -----------------------------------------------------------------------------------

/** A value as messages quote it: strings in quotes, everything else as written in code. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}
