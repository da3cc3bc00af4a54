import { onAbort, type WaitSignal } from './abort-fan-out';

export type WakeReason = 'notified' | 'timeout';

/**
 * What a message addressed to one waiter carried after its id (a hand-over), and when the subscriber
 * socket it came on became ready (monotonicNow; undefined when not known): a hand-over is believed
 * from a server only a reply on a connection no newer than that socket came from (see handOverFirstLease).
 */
export interface HeardPayload {
  readonly text: string;
  readonly socketSince?: number;
}

/** What a ticket asks of its channel's waiters (ChannelWaiters). */
export interface TicketSeat {
  /** Takes a wake-up that came while no waiter was parked, if there is one. */
  takePermit(): boolean;
  /** Whether the channel's waiters share their retries (see JoinOptions.shareRetries). */
  readonly sharesRetries: boolean;
  /** A shared retry: the longest-parked waiter tries in `ms`, unless one is due sooner. */
  retryIn(ms: number): void;
  park(ticket: WaitTicket): void;
  unpark(ticket: WaitTicket): void;
}

/**
 * One waiter's seat on a lock channel. `wait()` sleeps until an unlock message picks this waiter or
 * the timeout passes; a wake-up that arrives while the waiter is busy retrying is kept for its next
 * `wait()`, so none is lost.
 */
export class WaitTicket {
  /** A wake-up received while not parked. */
  pending = false;
  /** Woken while parked, and no attempt made since (see takePayload): the wake-up is not used yet. */
  private wokenUnused = false;
  /** What a message addressed to this waiter carried after its id (the fair lock's hand-off). */
  private payload?: HeardPayload;
  private wake?: (reason: WakeReason) => void;

  constructor(
    private readonly channel: TicketSeat,
    /** Fair-lock waiter id: a message equal to it wakes exactly this waiter. */
    readonly id: string | undefined,
    private readonly onLeave: (ticket: WaitTicket) => void,
  ) {}

  get parked(): boolean {
    return this.wake !== undefined;
  }

  /**
   * Sleeps until woken, or for `timeoutMs`; `retryMs`: when the lock may be free again by itself (a
   * refusal's TTL), a retry due then, which a channel that shares retries makes for one waiter only.
   */
  wait(timeoutMs: number, signal?: WaitSignal, retryMs?: number): Promise<WakeReason> {
    signal?.throwIfAborted();
    if (retryMs !== undefined && retryMs < timeoutMs) {
      if (this.channel.sharesRetries) this.channel.retryIn(retryMs);
      else timeoutMs = retryMs;
    }
    if (this.pending || this.channel.takePermit()) {
      this.pending = false;
      this.wokenUnused = true;
      return Promise.resolve('notified');
    }
    return new Promise<WakeReason>((resolve, reject) => {
      const finish = (reason: WakeReason): void => {
        clearTimeout(timer);
        stopListening?.();
        this.wake = undefined;
        this.wokenUnused = reason === 'notified';
        this.channel.unpark(this);
        resolve(reason);
      };
      const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
      const stopListening = signal
        ? onAbort(signal, () => {
            finish('timeout');
            reject(signal.reason);
          })
        : undefined;
      this.wake = finish;
      this.channel.park(this);
    });
  }

  /** Wakes this waiter now, or at its next wait(). */
  notify(payload?: HeardPayload): void {
    if (payload !== undefined) this.payload = payload;
    if (this.wake) this.wake('notified');
    else this.pending = true;
  }

  /**
   * A wake-up this waiter got and has not acted on: on leaving, it is handed to the next waiter (one
   * woken to take a lock, then aborted before its attempt, would otherwise leave the lock to timers).
   */
  get holdsUnusedWake(): boolean {
    return this.pending || this.wokenUnused;
  }

  /** The payload of the last message addressed to this waiter, once; called as each attempt is made. */
  takePayload(): HeardPayload | undefined {
    this.wokenUnused = false;
    const payload = this.payload;
    this.payload = undefined;
    return payload;
  }

  leave(): void {
    this.onLeave(this);
  }
}
