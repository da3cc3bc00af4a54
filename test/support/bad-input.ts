/**
 * Shared by the bad-input tests (engine and Nest): random option values of every shape a caller can
 * produce, the domain each option is supposed to accept, and the invariant that no lock key is left
 * without a TTL.
 */
import fc from 'fast-check';
import type Redis from 'ioredis';
import { LockAcquireTimeoutError, LockOptionsError } from '../../lib';
import { MAX_LEASE_MS } from '../../lib/engine/util/validation';

/** Numbers near every edge of the domain, and values of the wrong type. */
export const anyDuration: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(undefined),
  fc.integer({ min: -5, max: 120_000 }),
  fc.double({ min: -10, max: 100_000 }),
  fc.double(),
  fc.constantFrom(
    0,
    -0,
    0.4,
    1500.5,
    NaN,
    Infinity,
    -Infinity,
    2 ** 31 - 1,
    2 ** 31,
    30 * 24 * 3600 * 1000,
    MAX_LEASE_MS,
    MAX_LEASE_MS + 0.5,
    MAX_LEASE_MS + 1,
    1e19,
    Number.MAX_VALUE,
  ),
  fc.constantFrom('1500', '', 'abc', '1e3', null, true, {}, [], 10n),
);

/** Whether `value` is a duration the rule accepts (written independently of lib/engine/util/validation.ts). */
export function isValidDuration(value: unknown, rule: { positive: boolean; infinite?: boolean }): boolean {
  if (value === undefined) return true;
  if (typeof value !== 'number' || Number.isNaN(value)) return false;
  if (value === Infinity) return rule.infinite === true;
  return (rule.positive ? value > 0 : value >= 0) && value <= MAX_LEASE_MS;
}

/** Keys under `prefix` that would never expire: everything but the fencing counters must have a TTL. */
export async function keysWithoutTtl(redis: Redis, prefix: string): Promise<string[]> {
  const keys = await redis.keys(`${prefix}:*`);
  const stuck: string[] = [];
  for (const key of keys) {
    if (key.endsWith(':fence')) continue;
    // -1: no expiry (stuck); -2: it expired since KEYS listed it, which is fine.
    if ((await redis.pttl(key)) === -1) stuck.push(key);
  }
  return stuck;
}

export const PROPERTY_RUNS = 60;

/**
 * Runs `call`: it must succeed exactly when the options were `valid`, and otherwise throw a
 * LockOptionsError naming the lock and the lease or wait option (returned, for more checks).
 */
export async function succeedsOrNamesTheOption(
  valid: boolean,
  name: string,
  call: () => Promise<unknown>,
): Promise<LockOptionsError | undefined> {
  try {
    await call();
  } catch (error) {
    if (!(error instanceof LockOptionsError)) throw error;
    expect(valid).toBe(false);
    expect(error.key).toBe(name);
    expect(['leaseTime', 'waitTime']).toContain(error.option);
    return error;
  }
  expect(valid).toBe(true);
  return undefined;
}

/**
 * Whether a lease (valid as a duration, or not a number: no lease given) leaves the holder any of it after
 * the default drift margin, 1% + 2 ms (written independently of leaseEnd): a shorter one is refused.
 */
export function isBelievableLease(leaseTime: unknown): boolean {
  if (typeof leaseTime !== 'number') return true;
  const lease = Math.ceil(leaseTime);
  return lease - Math.round(lease * 0.01) - 2 > 0;
}

/**
 * Whether `error` is how an acquisition with a lease of a few ms may end on a busy machine, its input
 * valid: its grants came after the lease (a wait that ran out, or one with no waitTime told the lease
 * never suffices).
 */
export function comesTooLate(error: unknown): boolean {
  return (
    error instanceof LockAcquireTimeoutError || (error instanceof LockOptionsError && error.option === 'leaseTime')
  );
}
