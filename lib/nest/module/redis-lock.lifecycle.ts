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

  /** Aborted when shutdown starts: waits for a lock end with LockModuleClosedError. */
  get signal(): AbortSignal {
    return this.stopping.signal;
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
