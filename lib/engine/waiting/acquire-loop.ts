import { monotonicNow } from '../util/clock';
import { bounded } from '../redis/bounded';
import { isOutage } from '../redis/outage';
import { MAX_TIMER_MS } from '../util/long-timer';
import type { JoinOptions, LockWaiters } from './waiters';
import type { HeardPayload } from './wait-ticket';
import type { WaitSignal } from './abort-fan-out';

/** One acquisition attempt: acquired with a value, or refused with the holder's remaining lease. */
export type Attempt<T> = { acquired: true; value: T } | Refusal;
export type Refusal = { acquired: false; ttl: number };

/** How to wait: the seat options (waiter id, hand-off and wake-up hooks) are the waiters' own. */
export interface AcquireLoopOptions<T> extends JoinOptions {
  key: string;
  channel: string;
  waiters: LockWaiters;
  /**
   * `payload`: what the message that woke us carried for this waiter (the fair lock's hand-off);
   * `othersWaiting`: whether other waiters of this process wait on the channel too.
   */
  attempt: (payload: HeardPayload | undefined, othersWaiting: boolean) => Promise<Attempt<T>>;
  /** undefined = wait until acquired; 0 = one attempt. */
  waitTime: number | undefined;
  signal?: WaitSignal;
  /** Bound on SUBSCRIBE, like every Redis operation. */
  operationTimeout: number;
  /** Upper bound on one sleep, so a lost message costs at most this much (fair lock's re-check). */
  maxSleep?: number;
  /**
   * The connection ended and nobody will connect it again (see closedForGood): an outage is then not
   * waited out, since no attempt can get through any more.
   */
  connectionGone?: () => boolean;
  /**
   * The first attempt is all but sure to be granted (this process's last release of the lock was kept
   * in its turn, which the lock is reserved for): no seat is taken before it, as it would be left again
   * at once.
   */
  expectGrant?: boolean;
  /**
   * A parked waiter of this process was just woken to take the lock, which is reserved for this
   * process for this many ms more: the first attempt waits behind it, seated, for at most that long
   * (its release wakes the next parked waiter), instead of racing it to Redis. See
   * ProcessTurns.queueBehindWoken.
   */
  queueBehindWokenMs?: number;
}

/** Pause between attempts while Redis cannot be reached during a wait (a message ends it early). */
const OUTAGE_RETRY_MS = 100;

export type AcquireOutcome<T> = Attempt<T>;

/**
 * How much of an outage a wait sits out: until the wait ends; an unbounded wait for `operationTimeout`
 * of unbroken outage; a single attempt (`waitTime` 0) not at all. An outage is Redis unreachable
 * (failing over), or refusing for a while (full memory, no disk); never a missing permission.
 */
class OutageAllowance {
  private since?: number;

  constructor(
    private readonly waitTime: number | undefined,
    private readonly deadline: number,
    private readonly operationTimeout: number,
    private readonly connectionGone: () => boolean = () => false,
  ) {}

  /** Whether to keep waiting after `error`; if so, `retryIn()` says when to try again. */
  tolerates(error: unknown): boolean {
    if (!isOutage(error) || this.waitTime === 0 || this.connectionGone()) return false;
    this.since ??= monotonicNow();
    return monotonicNow() < this.giveUpAt();
  }

  retryIn(): number {
    return Math.max(0, Math.min(OUTAGE_RETRY_MS, this.giveUpAt() - monotonicNow()));
  }

  reached(): void {
    this.since = undefined;
  }

  private giveUpAt(): number {
    const bound = this.waitTime === undefined ? this.since! + this.operationTimeout : Infinity;
    return Math.min(this.deadline, bound);
  }
}

/**
 * Redisson's wait: try; if refused, subscribe to the lock's channel, try again (a release may have
 * happened before the subscription), then sleep until an unlock message or the holder's TTL,
 * whichever comes first, and retry. Never polls on a fixed interval, except while Redis cannot be
 * reached (a failover) or the subscription is not confirmed yet: then it retries every 100 ms until
 * the wait ends, so a wait that begins or runs into a failover still gets the lock after it.
 */
export async function acquireLoop<T>(options: AcquireLoopOptions<T>): Promise<AcquireOutcome<T>> {
  const { waitTime, signal, waiters, channel } = options;
  signal?.throwIfAborted();
  const deadline = waitTime === undefined ? Infinity : monotonicNow() + waitTime;
  const outage = new OutageAllowance(waitTime, deadline, options.operationTimeout, options.connectionGone);
  // Already subscribed (a hot key): take a seat before the first attempt, so a release right after
  // it cannot be missed and no second attempt is needed once subscribed. Not for an attempt expected
  // to be granted (most acquisitions inside a turn): a refusal then costs that second attempt instead.
  const live = waitTime !== 0 && waiters.isLive(channel);
  const seatedFirst = live && !options.expectGrant;
  const join = () => waiters.join(channel, options);
  let seat = seatedFirst ? join() : undefined;
  const othersWaiting = () => waiters.memberCount(channel) > (seat ? 1 : 0);
  try {
    /** The last refusal; undefined while the last attempt could not reach Redis. */
    let refused: Refusal | undefined;
    const behindWoken = seatedFirst ? options.queueBehindWokenMs : undefined;
    if (behindWoken !== undefined) {
      // Taken by the waiter ahead (as good as a refusal): sleep until its release wakes us, at most
      // until the reservation ends; every later pass of the loop tries Redis.
      refused = { acquired: false, ttl: behindWoken };
    } else {
      try {
        const firstResult = await options.attempt(undefined, othersWaiting());
        if (firstResult.acquired || waitTime === 0) return firstResult;
        refused = firstResult;
      } catch (error) {
        if (!outage.tolerates(error)) throw error;
      }
    }
    seat ??= join();
    const { ticket } = seat;
    if (!live) {
      // Not confirmed within the bound (a failover): go on, retrying briefly until it is.
      await bounded(seat.subscribed, options.operationTimeout, { key: options.key, name: 'subscribe' }).catch(
        (error: unknown) => {
          if (!outage.tolerates(error)) throw error;
        },
      );
    }
    for (let first = true; ; first = false) {
      signal?.throwIfAborted();
      // A release between an unseated attempt's refusal and the seat went unheard: try again first.
      if (!first || !seatedFirst || refused === undefined) {
        try {
          const result = await options.attempt(ticket.takePayload(), othersWaiting());
          outage.reached();
          if (result.acquired) return result;
          refused = result;
        } catch (error) {
          if (!outage.tolerates(error)) throw error;
          refused = undefined;
          await ticket.wait(outage.retryIn(), signal);
          continue;
        }
      }
      if (!refused) continue; // unreachable: retried above
      const remaining = deadline - monotonicNow();
      // (Queued behind a woken waiter, nothing was asked yet: the next pass asks once, at once.)
      if (remaining <= 0 && !(first && behindWoken !== undefined)) return refused;
      // PTTL -2: released in between, retry at once; -1 (no expiry): rely on the message.
      const ttl = refused.ttl === -2 ? 0 : refused.ttl === -1 ? remaining : refused.ttl;
      // Until the subscription is confirmed a release could go unheard: re-check briefly.
      const unheard = waiters.isLive(channel) ? MAX_TIMER_MS : (waiters.resubscribe(channel), OUTAGE_RETRY_MS);
      const bound = Math.min(remaining, unheard, options.maxSleep ?? MAX_TIMER_MS, MAX_TIMER_MS);
      await ticket.wait(bound, signal, ttl);
    }
  } finally {
    seat?.ticket.leave();
  }
}
