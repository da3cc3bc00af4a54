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
