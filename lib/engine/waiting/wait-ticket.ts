import { onAbort } from './abort-fan-out';

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

  wait(timeoutMs: number, signal?: AbortSignal): Promise<WakeReason> {
    signal?.throwIfAborted();
    if (this.pending || this.channel.takePermit()) {
      this.pending = false;
      return Promise.resolve('notified');
    }
    return new Promise<WakeReason>((resolve, reject) => {
      const finish = (reason: WakeReason): void => {
        clearTimeout(timer);
        stopListening?.();
        this.wake = undefined;
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

  /** The payload of the last message addressed to this waiter, once. */
  takePayload(): HeardPayload | undefined {
    const payload = this.payload;
    this.payload = undefined;
    return payload;
  }

  leave(): void {
    this.onLeave(this);
  }
}
