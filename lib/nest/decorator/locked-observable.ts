import { Observable, type Subscription } from 'rxjs';
import { runInLockScope } from '../../engine/owner-scope';
import type { RedisLockRuntime } from '../module/redis-lock-runtime';
import { warnReleaseFailed } from '../../engine/with-lock';
import { runWithActiveLock } from '../service/current-lock';
import type { HeldLock } from '../service/held-lock';
import { runInvocation, type HandlerInvocation } from './handler-invocation';
import type { LockSpec } from './lock-spec';

export interface LockedObservableOptions<T> {
  /** The application the call belongs to. */
  runtime: RedisLockRuntime;
  spec: LockSpec;
  /** The lock name(s) for this call (may throw LockKeyError: nothing is locked then). */
  name: () => string | readonly string[] | Promise<string | readonly string[]>;
  /** The work: called, and subscribed to, inside the lock's owner scope once the lock is held. */
  run: () => Observable<T>;
  newScope: boolean;
  /** The interceptor's call of a handler, whose returned Promise the release waits for. */
  invocation?: HandlerInvocation;
  /** Aborts the wait when the caller goes away (an HTTP client that disconnected); returns how to stop watching. */
  watchWait?: (abort: (reason: unknown) => void) => () => void;
  /** Turns a failure to get the lock (not an error of the work) into what the caller should see. */
  mapError?: (error: unknown) => unknown;
}

/**
 * An Observable that acquires the lock when subscribed, then subscribes to `run()` inside the lock's
 * scope, and releases the lock when that completes, errors or is unsubscribed, before passing the
 * completion or error on (so a caller that sees the end also sees the lock free). The work's own
 * values and errors pass through unchanged.
 */
export function lockedObservable<T>(options: LockedObservableOptions<T>): Observable<T> {
  const { runtime, spec, invocation } = options;
  const { locks, lifecycle, holdTimes, logger } = runtime;
  return new Observable<T>((subscriber) => {
    const waiting = new AbortController();
    let handle: HeldLock | undefined;
    let work: Subscription | undefined;
    let released: Promise<void> | undefined;
    let acquiredAt = 0;
    // Shutdown waits for this call until its lock is released (or it never got one).
    let finish!: () => void;
    lifecycle.track(new Promise<void>((resolve) => (finish = resolve)));

    const release = (): Promise<void> => {
      const held = handle;
      if (!held) return Promise.resolve();
      return (released ??= (async () => {
        // Unsubscribing does not stop a handler's Promise: keep the lock until its work is done.
        await invocation?.settled;
        holdTimes.record(spec, Date.now() - acquiredAt);
        await held.release().catch((error: Error) => warnReleaseFailed(logger, held.lock.name, error));
        finish();
      })());
    };
    const thenForward = (forward: () => void) => void release().then(forward);

    runInLockScope(
      async () => {
        const stopWatching = options.watchWait?.((reason) => waiting.abort(reason));
        try {
          handle = await locks.hold(await options.name(), {
            kind: spec.kind,
            waitTime: spec.waitTime,
            leaseTime: spec.leaseTime,
            signal: waiting.signal,
            label: spec.label,
            permits: spec.permits,
            mode: spec.mode,
          });
          acquiredAt = Date.now();
        } finally {
          stopWatching?.();
        }
        if (subscriber.closed) return release();
        const { lock } = handle;
        const subscribe = () =>
          options.run().subscribe({
            next: (value) => subscriber.next(value),
            error: (error: unknown) => thenForward(() => subscriber.error(error)),
            complete: () => thenForward(() => subscriber.complete()),
          });
        work = runWithActiveLock(lock, () => (invocation ? runInvocation(invocation, subscribe) : subscribe()));
      },
      { newScope: options.newScope },
    ).catch((error: unknown) => {
      if (handle) {
        // run() itself threw: that is the work's error.
        thenForward(() => subscriber.error(error));
      } else {
        finish();
        if (!subscriber.closed) subscriber.error(options.mapError ? options.mapError(error) : error);
      }
    });

    return () => {
      waiting.abort();
      work?.unsubscribe();
      void release();
    };
  });
}
