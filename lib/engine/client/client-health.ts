import { monotonicNow } from '../util/clock';
import type { RedisClient } from '../redis/redis-client';
import type { Watchdog } from '../holds/watchdog';

/** What `LockClient.health()` found; `healthy` when every part is. */
export interface LockClientHealth {
  healthy: boolean;
  /** The lock connection: answers PING within operationTimeout. */
  redis: {
    healthy: boolean;
    status: string;
    pingMs?: number;
    error?: string;
    /**
     * While it is not ready: why its latest connection attempt failed, naming the setting to fix when
     * Redis refused it (a password or certificate rotated on the server while this client runs).
     */
    connectionError?: string;
  };
  /** The subscriber waiters sleep on: not cut off (it connects on the first wait, so 'wait' is fine). */
  subscriber: { healthy: boolean; status: string };
  /** The renewals of watched leases: on schedule (lag within one interval). */
  watchdog: { healthy: boolean; watchedLocks: number; lagMs: number };
}

/** What health reads of its client (a LockClient). */
export interface HealthSubject {
  readonly redis: RedisClient;
  readonly subscriberStatus: string;
  readonly watchdogTimeout: number;
}

/** Connection states in which a subscriber still delivers, or will once needed. */
const SUBSCRIBER_OK = new Set(['wait', 'connecting', 'connect', 'ready', 'unknown']);

/** See LockClient.health(). */
export async function checkHealth(
  client: HealthSubject,
  renewals: Watchdog,
  ping: () => Promise<unknown>,
  /** Why the lock connection fails to connect, if it does (see LockClientOptions.connectionProblem). */
  connectionProblem: () => string | undefined,
): Promise<LockClientHealth> {
  // Read before the PING's await: a renewal round that runs meanwhile must not hide a lag seen now.
  const lagMs = renewals.lagMs;
  const watchedLocks = renewals.size;
  const started = monotonicNow();
  const redis: LockClientHealth['redis'] = { healthy: true, status: client.redis.status };
  try {
    await ping();
    redis.pingMs = monotonicNow() - started;
  } catch (error) {
    redis.healthy = false;
    redis.error = (error as Error).message;
  }
  redis.status = client.redis.status; // after the PING: what it found
  if (!redis.healthy) {
    const problem = connectionProblem();
    if (problem !== undefined) redis.connectionError = problem;
  }
  const subscriberStatus = client.subscriberStatus;
  const subscriber = { healthy: SUBSCRIBER_OK.has(subscriberStatus), status: subscriberStatus };
  const watchdog = { healthy: lagMs <= client.watchdogTimeout / 3, watchedLocks, lagMs };
  return { healthy: redis.healthy && subscriber.healthy && watchdog.healthy, redis, subscriber, watchdog };
}
