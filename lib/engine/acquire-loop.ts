import { bounded } from './bounded';
import { MAX_TIMER_MS } from './long-timer';
import type { LockWaiters } from './waiters';

/** One acquisition attempt: acquired with a value, or refused with the holder's remaining lease. */
export type Attempt<T> = { acquired: true; value: T } | { acquired: false; ttl: number };

export interface AcquireLoopOptions<T> {
  key: string;
  channel: string;
  waiters: LockWaiters;
  /** `payload`: what the message that woke us carried for this waiter (the fair lock's hand-off). */
  attempt: (payload?: string) => Promise<Attempt<T>>;
  /** undefined = wait until acquired; 0 = one attempt. */
  waitTime: number | undefined;
  signal?: AbortSignal;
  /** Bound on SUBSCRIBE, like every Redis operation. */
  operationTimeout: number;
  /** Fair-lock waiter id (targeted wake-ups). */
  waiterId?: string;
  /** Upper bound on one sleep, so a lost message costs at most this much (fair lock's re-check). */
  maxSleep?: number;
}

export type AcquireOutcome<T> = { acquired: true; value: T } | { acquired: false; ttl: number };

/**
 * Redisson's wait: try; if refused, subscribe to the lock's channel, try again (a release may have
 * happened before the subscription), then sleep until an unlock message or the holder's TTL,
 * whichever comes first, and retry. Never polls on a fixed interval.
 */
export async function acquireLoop<T>(options: AcquireLoopOptions<T>): Promise<AcquireOutcome<T>> {
  const { waitTime, signal } = options;
  signal?.throwIfAborted();
  const deadline = waitTime === undefined ? Infinity : Date.now() + waitTime;
  // Already subscribed (a hot key): take a seat before the first attempt, so a release right after
  // it cannot be missed and no second attempt is needed once subscribed.
  const live = waitTime !== 0 && options.waiters.isLive(options.channel);
  let seat = live ? options.waiters.join(options.channel, options.waiterId) : undefined;
  try {
    let result = await options.attempt();
    if (result.acquired || waitTime === 0) return result;
    seat ??= options.waiters.join(options.channel, options.waiterId);
    const { ticket } = seat;
    await bounded(seat.subscribed, options.operationTimeout, { key: options.key, name: 'subscribe' });
    for (let first = true; ; first = false) {
      signal?.throwIfAborted();
      if (!first || !live) {
        result = await options.attempt(ticket.takePayload());
        if (result.acquired) return result;
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) return result;
      // PTTL -2: released in between, retry at once; -1 (no expiry): rely on the message.
      const ttl = result.ttl === -2 ? 0 : result.ttl === -1 ? remaining : result.ttl;
      await ticket.wait(Math.min(ttl, remaining, options.maxSleep ?? MAX_TIMER_MS, MAX_TIMER_MS), signal);
    }
  } finally {
    seat?.ticket.leave();
  }
}
