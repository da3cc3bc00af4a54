import { bounded } from './bounded';
import { RedisUnavailableError } from './errors';
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
  /** A message addressed to a waiter this process no longer has (it gave up): pass its hand-off on. */
  onUnclaimed?: (waiterId: string) => void;
}

/** Pause between attempts while Redis cannot be reached during a wait (a message ends it early). */
const OUTAGE_RETRY_MS = 100;

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
  let seat = live ? options.waiters.join(options.channel, options.waiterId, options.onUnclaimed) : undefined;
  try {
    const firstResult = await options.attempt();
    if (firstResult.acquired || waitTime === 0) return firstResult;
    let refused = firstResult;
    seat ??= options.waiters.join(options.channel, options.waiterId, options.onUnclaimed);
    const { ticket } = seat;
    await bounded(seat.subscribed, options.operationTimeout, { key: options.key, name: 'subscribe' });
    let unreachableSince: number | undefined;
    for (let first = true; ; first = false) {
      signal?.throwIfAborted();
      if (!first || !live) {
        let result: Attempt<T>;
        try {
          result = await options.attempt(ticket.takePayload());
          unreachableSince = undefined;
        } catch (error) {
          // Redis failing over while we wait: keep waiting (the wait is the caller's bound; an
          // unbounded wait tolerates operationTimeout of it), trying again with a short back-off.
          if (!(error instanceof RedisUnavailableError)) throw error;
          unreachableSince ??= Date.now();
          const giveUpAt = Math.min(
            deadline,
            waitTime === undefined ? unreachableSince + options.operationTimeout : Infinity,
          );
          if (Date.now() >= giveUpAt) throw error;
          await ticket.wait(Math.min(OUTAGE_RETRY_MS, giveUpAt - Date.now()), signal);
          continue;
        }
        if (result.acquired) return result;
        refused = result;
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) return refused;
      // PTTL -2: released in between, retry at once; -1 (no expiry): rely on the message.
      const ttl = refused.ttl === -2 ? 0 : refused.ttl === -1 ? remaining : refused.ttl;
      await ticket.wait(Math.min(ttl, remaining, options.maxSleep ?? MAX_TIMER_MS, MAX_TIMER_MS), signal);
    }
  } finally {
    seat?.ticket.leave();
  }
}
