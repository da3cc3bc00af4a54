import { monotonicNow } from '../util/clock';
import { bounded } from './bounded';
import { writesToFixedServer } from './fixed-server';
import { closedForGood } from './connection-end';
import { nextReady } from '../waiting/next-ready';
import { isOutage } from './outage';
import type { RedisClient } from './redis-client';
import { refreshSlotsSoon } from './slot-refresh';
import { sleep } from '../util/sleep';

export interface RetryWhileUnreachableOptions {
  redis: RedisClient;
  /** Each send is bounded like any operation. */
  operationTimeout: number;
  /** Give up (rethrowing the last error) once this time (monotonicNow ms) has passed. */
  until: number;
  key?: string;
  name: string;
}

/**
 * Sends an idempotent operation (a release, a fair-lock acceptance) again while Redis cannot take it
 * (see isOutage: a failover, a freeze, a disk it cannot save to), backing off from 25 ms to 250 ms (or
 * sooner, as soon as the connection is ready again), until it is answered or `until` passes. Only for
 * operations whose repeat changes nothing once the first one landed.
 */
export async function retryWhileUnreachable<T>(
  send: () => Promise<T>,
  options: RetryWhileUnreachableOptions,
): Promise<T> {
  const { redis, operationTimeout, until, key, name } = options;
  for (let pause = 25; ; pause = Math.min(pause * 2, 250)) {
    try {
      return await bounded(send(), operationTimeout, { key, name, readOnlyIsFinal: writesToFixedServer(redis) });
    } catch (error) {
      if (!isOutage(error) || monotonicNow() >= until || closedForGood(redis)) throw error;
      refreshSlotsSoon(redis);
    }
    // Back off, but go again the moment the connection is back: every ms here keeps the lock blocked.
    await Promise.race([sleep(Math.min(pause, Math.max(0, until - monotonicNow()))), nextReady(redis)]);
  }
}
