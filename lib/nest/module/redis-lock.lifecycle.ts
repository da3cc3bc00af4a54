import { Injectable } from '@nestjs/common';
import { LockModuleClosedError } from '../errors/lock-module-closed-error';
import { messages } from '../redis-lock.messages';

/**
 * What runs under this application's locks (decorated calls, `LockService.withLock`), so that
 * shutdown can let it finish before the locks are released, and stop new acquisitions meanwhile.
 */
@Injectable()
export class LockLifecycle {
  private readonly running = new Set<Promise<unknown>>();
  private readonly stopping = new AbortController();
  private readonly closingHandlers = new AbortController();
  /** Handler waits running (see beginHandlerWait), and what to call once none is. */
  private handlerWaitsRunning = 0;
  private noHandlerWaitRunning?: () => void;

  /** Aborted when shutdown starts: waits for a lock end with LockModuleClosedError. */
  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  /**
   * Aborted when the application starts closing (beforeApplicationShutdown), before Nest closes its
   * servers: a handler still waiting for its lock must end then (503), or closing the HTTP server,
   * which waits for every request in flight, would wait for a lock held elsewhere.
   */
  get handlerWaits(): AbortSignal {
    return this.closingHandlers.signal;
  }

  /** Ends the waits of handlers (see handlerWaits); locks of providers and LockService still work. */
  closeHandlerWaits(): void {
    if (!this.closingHandlers.signal.aborted) this.closingHandlers.abort(new LockModuleClosedError(messages.closing()));
  }

  /** A wait for a lock inside a handler's call starts; `endHandlerWait` when it has settled. */
  beginHandlerWait(): void {
    this.handlerWaitsRunning++;
  }

  endHandlerWait(): void {
    if (--this.handlerWaitsRunning === 0) this.noHandlerWaitRunning?.();
  }

  /**
   * Ends the waits of handlers (closeHandlerWaits) and lets them answer their callers before Nest
   * closes its servers: waits up to `graceMs` for those waits to settle, then one turn of the event
   * loop for the handlers' failures to be written (a socket.io client then gets LOCK_UNAVAILABLE
   * before its disconnect). Nothing to wait for when no handler was waiting.
   */
  async endHandlerWaits(graceMs: number): Promise<void> {
    this.closeHandlerWaits();
    if (this.handlerWaitsRunning === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.noHandlerWaitRunning = resolve;
      timer = setTimeout(resolve, graceMs);
    });
    clearTimeout(timer);
    this.noHandlerWaitRunning = undefined;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** Throws LockModuleClosedError once shutdown has started. */
  assertOpen(name: string): void {
    if (this.stopping.signal.aborted) throw new LockModuleClosedError(messages.closing(name), name);
  }

  /** Counts `work` as running until it settles. */
  track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work);
    const done = () => this.running.delete(work);
    work.then(done, done);
    return work;
  }

  /** Refuses new locks, cuts waits short, then waits up to `timeoutMs` for running work. Returns how much still runs. */
  async drain(timeoutMs: number): Promise<number> {
    this.closeHandlerWaits();
    if (!this.stopping.signal.aborted) this.stopping.abort(new LockModuleClosedError(messages.closing()));
    if (this.running.size > 0 && timeoutMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.running]),
        new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
    }
    return this.running.size;
  }
}
