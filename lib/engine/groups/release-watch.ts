import { onAbort } from '../waiting/abort-fan-out';
import type { WaitTicket } from '../waiting/wait-ticket';
import { MAX_TIMER_MS } from '../util/long-timer';

/**
 * Counts the unlock messages of one waiting acquisition, per master. Its tickets stay parked
 * between rounds, so a release announced while a round runs is counted, not lost. Any master's
 * announcement wakes the wait: one release (a message from each master it was held on) wakes it once.
 */
export class ReleaseWatch {
  private readonly received: number[];
  private readonly stop = new AbortController();
  private wake?: () => void;

  constructor(private readonly tickets: WaitTicket[]) {
    this.received = tickets.map(() => 0);
    tickets.forEach((ticket, index) => void this.listen(ticket, index));
  }

  /** Messages received so far, per master. */
  counts(): number[] {
    return [...this.received];
  }

  /**
   * Resolves once a master announced a release since `seen` (from counts()): true; or, false, after
   * `timeoutMs` or when `signal` aborts.
   */
  next(seen: number[], timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.received.some((count, i) => count > seen[i])) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (announced: boolean): void => {
        clearTimeout(timer);
        stopListening?.();
        this.wake = undefined;
        resolve(announced);
      };
      const timer = setTimeout(() => done(false), Math.min(timeoutMs, MAX_TIMER_MS));
      const stopListening = signal ? onAbort(signal, () => done(false)) : undefined;
      this.wake = () => done(true);
    });
  }

  close(): void {
    this.stop.abort();
    for (const ticket of this.tickets) ticket.leave();
  }

  private async listen(ticket: WaitTicket, index: number): Promise<void> {
    try {
      for (;;) {
        if ((await ticket.wait(MAX_TIMER_MS, this.stop.signal)) === 'notified') {
          this.received[index]++;
          this.wake?.();
        }
      }
    } catch {
      // closed
    }
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    const stopListening = signal ? onAbort(signal, done) : undefined;
    function done(): void {
      clearTimeout(timer);
      stopListening?.();
      resolve();
    }
  });
}
