import { onAbort, type WaitSignal } from '../waiting/abort-fan-out';
import type { WaitTicket } from '../waiting/wait-ticket';
import { MAX_TIMER_MS } from '../util/long-timer';

/**
 * Counts the unlock messages of one waiting acquisition, per master. Its tickets stay parked
 * between rounds, so a release announced while a round runs is counted, not lost; and the wait can
 * listen to some masters only (a waiter refused by the gate waits for the gate's next release).
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
   * Resolves once one of `masters` (undefined: any) announced a release since `seen` (from counts()):
   * true; or, false, after `timeoutMs` or when `signal` aborts.
   */
  next(seen: number[], masters: number[] | undefined, timeoutMs: number, signal?: WaitSignal): Promise<boolean> {
    const heard = (i: number): boolean => masters === undefined || masters.includes(i);
    if (this.received.some((count, i) => count > seen[i] && heard(i))) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (announced: boolean): void => {
        clearTimeout(timer);
        stopListening?.();
        this.wake = undefined;
        resolve(announced);
      };
      const timer = setTimeout(() => done(false), Math.min(timeoutMs, MAX_TIMER_MS));
      const stopListening = signal ? onAbort(signal, () => done(false)) : undefined;
      this.wake = (index) => heard(index) && done(true);
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
export function delay(ms: number, signal?: WaitSignal): Promise<void> {
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
