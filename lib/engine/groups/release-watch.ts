import { onAbort } from '../waiting/abort-fan-out';
import type { WaitTicket } from '../waiting/wait-ticket';
import { MAX_TIMER_MS } from '../util/long-timer';

/**
 * Counts the unlock messages of one waiting acquisition, per master. Its tickets stay parked
 * between rounds, so a release announced while a round runs is counted, not lost; and the wait
 * after a refusal wakes only for the masters that refused: one release (a message from each
 * master it was held on) wakes the acquisition once, not once per master.
 */
export class ReleaseWatch {
  private readonly received: number[];
  private readonly stop = new AbortController();
  private wake?: (index: number) => void;

  constructor(private readonly tickets: WaitTicket[]) {
    this.received = tickets.map(() => 0);
    tickets.forEach((ticket, index) => void this.listen(ticket, index));
  }

  /** Messages received so far, per master. */
  counts(): number[] {
    return [...this.received];
  }

  /**
   * Resolves once one of `masters` announced a release since `seen` (from counts()), after
   * `timeoutMs`, or when `signal` aborts.
   */
  next(seen: number[], masters: number[], timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (masters.some((i) => this.received[i] > seen[i])) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        stopListening?.();
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, Math.min(timeoutMs, MAX_TIMER_MS));
      const stopListening = signal ? onAbort(signal, done) : undefined;
      this.wake = (index) => masters.includes(index) && done();
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
          this.wake?.(index);
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
