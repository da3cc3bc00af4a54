import { LockError } from '../errors/lock-error';
import { settledWithin } from '../util/sleep';
import type { CombinedSignal, WaitSignal } from './abort-fan-out';

/**
 * The `lock()` / `tryLock()` calls of one client still running, so that its `close()` ends them before
 * it gives up its holds and connections: a wait that outlived close() was granted on a connection the
 * application keeps (a hold nobody releases), or its clean-up (a write wait's intent, which holds
 * readers back) could no longer reach Redis.
 */
export class ClosingWaits {
  private readonly controller = new AbortController();
  /** Acquisitions begun and not yet ended: a count, not a Set entry and two promises per call. */
  private running = 0;
  /** Resolves once `running` drops to 0 after close() began waiting for it. */
  private drained?: Promise<void>;
  private onDrained?: () => void;

  /** Aborts (with a LockError) once the client closes: every acquisition waits on it too. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * The signal one acquisition waits on: the client's closing, and the caller's `own` signal if given
   * (the reason is the one that aborted; the caller's once both have). Nothing is listened to here: a
   * wait listens while it sleeps (see onAbort), one listener on each shared signal however many wait.
   */
  signalFor(own: AbortSignal | undefined): WaitSignal {
    const closing = this.controller.signal;
    return own ? new EitherSignal(own, closing) : closing;
  }

  /** One acquisition begins: close() waits until it has ended (see end). */
  begin(): void {
    this.running++;
  }

  /** That acquisition has ended, its clean-up included (called once per begin, however it ends). */
  end(): void {
    if (--this.running > 0 || !this.onDrained) return;
    this.onDrained();
    this.onDrained = undefined;
  }

  /** Ends every wait and waits up to `boundMs` for them (and what they undo in Redis) to settle. */
  async close(boundMs: number): Promise<void> {
    this.controller.abort(new LockError('The lock client is closing: its waits for locks end.'));
    if (this.running === 0) return;
    this.drained ??= new Promise<void>((resolve) => (this.onDrained = resolve));
    await settledWithin(this.drained, boundMs);
  }
}

/**
 * The caller's signal or the client's closing, whichever aborts: read from the two at each check, so
 * an acquisition makes no AbortController and registers nothing until it sleeps (one of each, made per
 * acquisition, cost 6-9 µs of CPU and their garbage, and the Nest module passes a signal to every one).
 */
class EitherSignal implements CombinedSignal {
  constructor(
    private readonly own: AbortSignal,
    private readonly closing: AbortSignal,
  ) {}

  /** Made only when a wait sleeps and listens (most acquisitions never do). */
  get parts(): readonly AbortSignal[] {
    return [this.own, this.closing];
  }

  get aborted(): boolean {
    return this.own.aborted || this.closing.aborted;
  }

  get reason(): unknown {
    return this.own.aborted ? this.own.reason : this.closing.reason;
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }
}
