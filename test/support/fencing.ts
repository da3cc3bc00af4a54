import type { Redis } from 'ioredis';

/**
 * A fencing counter far above Redis's clock in µs (about the year 2191), so the next tokens are this
 * plus 1, 2, ... (see lua/include/fencing.lua): for tests that follow tokens one by one.
 */
export const FENCE_SEED = 7_000_000_000_000_000;

/** Sets `fence` to FENCE_SEED (kept 10 minutes). */
export async function seedFence(redis: Redis, fence: string): Promise<void> {
  await redis.set(fence, String(FENCE_SEED), 'PX', 600_000);
}

/** Redis's clock in µs since the epoch: no token granted after this moment is below it. */
export async function serverMicros(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1_000_000 + Number(micros);
}

/** Matches a token taken from Redis's clock: a safe integer at or above `floor` µs (default: 2024). */
export function clockToken(floor = 1_700_000_000_000_000) {
  return {
    asymmetricMatch: (value: unknown) => Number.isSafeInteger(value) && (value as number) >= floor,
    toString: () => `a fencing token from the clock (>= ${floor})`,
    toAsymmetricMatcher: () => `clockToken(${floor})`,
  };
}
