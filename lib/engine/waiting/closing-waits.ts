import { LockError } from '../errors/lock-error';
import { settledWithin } from '../util/sleep';
import { onAbort } from './abort-fan-out';

/**
 * The `lock()` / `tryLock()` calls of one client still running, so that its `close()` ends them before
 * it gives up its holds and connections: a wait that outlived close() was granted on a connection the
 * application keeps (a hold nobody releases), or its clean-up (a write wait's intent, which holds
 * readers back) could no longer reach Redis.
 */
export class ClosingWaits {
  private readonly controller = new AbortController();
  private readonly running = new Set<Promise<void>>();

  /** Aborts (with a LockError) once the client closes: every acquisition waits on it too. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * The signal one acquisition waits on: the client's closing, and the caller's `own` signal if given
   * (its reason when it aborts first). One listener on each shared signal however many wait (see
   * onAbort); `done` stops listening.
   */
  signalFor(own: AbortSignal | undefined): { signal: AbortSignal; done: () => void } {
    const closing = this.controller.signal;
    if (!own) return { signal: closing, done: () => undefined };
    const either = new AbortController();
    const abort = (from: AbortSignal) => () => either.abort(from.reason);
    if (own.aborted) abort(own)();
    else if (closing.aborted) abort(closing)();
    const stops = [onAbort(own, abort(own)), onAbort(closing, abort(closing))];
    return { signal: either.signal, done: () => stops.forEach((stop) => stop()) };
  }

  /** `wait`: one acquisition; close() waits for it to settle (its clean-up included). */
  track<T>(wait: Promise<T>): Promise<T> {
    const settled = wait.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(settled);
    void settled.then(() => this.running.delete(settled));
    return wait;
  }

  /** Ends every wait and waits up to `boundMs` for them (and what they undo in Redis) to settle. */
  async close(boundMs: number): Promise<void> {
    this.controller.abort(new LockError('The lock client is closing: its waits for locks end.'));
    if (this.running.size > 0) await settledWithin(Promise.all(this.running), boundMs);
  }
}
