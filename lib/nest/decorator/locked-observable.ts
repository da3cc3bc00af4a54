import { monotonicNow } from '../../engine/util/clock';
import { finished } from 'node:stream';
import { Observable, type Subscription } from 'rxjs';
import type { RedisLockRuntime } from '../module/redis-lock.runtime';
import { warnReleaseFailed } from '../../engine/lock/with-lock';
import { onAbort } from '../../engine/waiting/abort-fan-out';
import { runWithActiveLock } from '../service/active-lock.store';
import { cancellableLock, type ServiceHold } from '../service/service-hold';
import { abortAtShutdown } from '../service/until-shutdown';
import { LockCallCancelledError } from '../errors/lock-call-cancelled-error';
import { LockCallEndedError } from '../errors/lock-call-ended-error';
import { messages } from '../redis-lock.messages';
import { outsideWork, PendingWork } from './pending-work';
import { runInvocation, type HandlerInvocation } from './handler-invocation';
import { lockedIterator } from './locked-iterator';
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

/** How long a lock waits for the work of a call that ended (or whose caller left) before the log says so (then every as long again). */
const PENDING_WORK_WARN_MS = 30_000;

/**
 * An Observable that acquires the lock when subscribed, then subscribes to `run()` inside the lock's
 * critical section, and releases the lock when the work has ended, before passing the completion or
 * error on (so a caller that sees the end also sees the lock free). The work's own values and errors
 * pass through unchanged.
 *
 * When the caller unsubscribes first (a client that disconnected), the work's `signal` aborts with
 * LockCallCancelledError and the work's Observable is unsubscribed (its timers and subscriptions end
 * there), but the lock stays until what cannot be cancelled has stopped: the handler's Promise, every
 * promise the work started (see PendingWork). So when the result ends while such promises still run (a
 * `timeout()`, a `race()`): the signal aborts with LockCallEndedError, the caller gets the result, and
 * the lock stays until they settle. A stream emitted as a value (a StreamableFile, a Readable) keeps
 * the lock until it has been sent or destroyed, an async iterator (a GraphQL subscription's events)
 * until it has ended or been closed (see lockedIterator).
 */
export function lockedObservable<T>(options: LockedObservableOptions<T>): Observable<T> {
  const { runtime, spec, invocation } = options;
  const { locks, lifecycle, holdTimes, logger } = runtime;
  return new Observable<T>((subscriber) => {
    const waiting = new AbortController();
    const cancel = new AbortController();
    let handle: ServiceHold | undefined;
    let work: Subscription | undefined;
    let pending: PendingWork | undefined;
    /** Stops the call's view of its lock listening to the hold's signal (see cancellableLock). */
    let stopSignal: (() => void) | undefined;
    /** The work's Observable completed or failed. */
    let ended = false;
    /** The caller left before that. */
    let cancelled = false;
    /** When each stream emitted as a value has been sent or destroyed, each async iterator has ended. */
    const streams: Promise<void>[] = [];
    let released: Promise<void> | undefined;
    let acquiredAt = 0;
    // Shutdown waits for this call until its lock is released (or it never got one).
    let finish!: () => void;
    lifecycle.track(new Promise<void>((resolve) => (finish = resolve)));

    /** `leftover`: the work's result ended while promises it started still run (their signal aborted now). */
    const release = (leftover?: () => void): Promise<void> => {
      const held = handle;
      if (!held) return Promise.resolve();
      // Outside the work's chain: the release's own promises are not the work's.
      return (released ??= outsideWork(async () => {
        await invocation?.settled;
        // First the streams and iterators: what they run is the work, not what outlives it.
        await Promise.all(streams);
        if (pending && (cancelled || (await pending.outlivesResult()))) {
          if (!cancelled) {
            const { name } = held.lock;
            cancel.abort(new LockCallEndedError(messages.callEnded(name), name));
            leftover?.();
          }
          await settledOrWarn(pending, held.lock, logger);
        }
        pending?.stop();
        holdTimes.record(spec, monotonicNow() - acquiredAt);
        await held.release().catch((error: Error) => warnReleaseFailed(logger, held.lock.name, error));
        stopSignal?.();
        finish();
      }));
    };
    /** The caller left before the work ended: its signal aborts, and the lock waits for the work to stop. */
    const cancelCall = () => {
      cancelled = true;
      const { name } = handle!.lock;
      cancel.abort(new LockCallCancelledError(messages.callCancelled(name), name));
    };
    /**
     * The work ended: release, then tell the caller. A stream being sent, an async iterator being read,
     * or promises the work started that still run, are released after instead: the caller gets its
     * result (a timeout's error, the iterator) at once.
     */
    const end = (forward: () => void) => {
      ended = true;
      if (streams.length > 0) {
        forward();
        return void release();
      }
      let forwarded = false;
      const forwardOnce = () => {
        if (forwarded) return;
        forwarded = true;
        forward();
      };
      // Outside the work's chain: a promise of its own waiting for the release would hold the release up.
      outsideWork(() => void release(forwardOnce).then(forwardOnce));
    };

    const lockOptions = {
      kind: spec.kind,
      waitTime: spec.waitTime,
      leaseTime: spec.leaseTime,
      signal: waiting.signal,
      label: spec.label,
      permits: spec.permits,
      mode: spec.mode,
    };
    (async () => {
      const names = await options.name();
      await locks.asCriticalSection(
        names,
        lockOptions,
        async () => {
          // A re-entry from inside running work, which shutdown waits for, goes on after shutdown started.
          const reentry = locks.reentersAfterShutdown(names, lockOptions);
          const abortWait = (reason: unknown) => waiting.abort(reason);
          const stopWatching = options.watchWait?.(abortWait);
          // The module's shutdown ends the wait too, told here so that LockService combines no signals.
          const stopAtShutdown = reentry ? undefined : abortAtShutdown(locks.shutdownSignal(), abortWait);
          try {
            handle = await locks.hold(names, lockOptions, true);
            acquiredAt = monotonicNow();
          } finally {
            stopWatching?.();
            stopAtShutdown?.();
          }
          if (subscriber.closed) return release();
          const { lock, stop } = cancellableLock(handle.lock, cancel.signal);
          stopSignal = stop;
          pending = PendingWork.start();
          const subscribe = () =>
            options.run().subscribe({
              next: (value) => {
                const sent = streamSent(value);
                const events = sent ? undefined : lockedIterator(value, cancelCall);
                const ended = sent ?? events?.ended;
                if (ended) streams.push(ended);
                subscriber.next(events ? (events.iterator as T) : value);
              },
              error: (error: unknown) => end(() => subscriber.error(error)),
              complete: () => end(() => subscriber.complete()),
            });
          work = pending.run(() =>
            runWithActiveLock(lock, () => (invocation ? runInvocation(invocation, subscribe) : subscribe())),
          );
          // The caller left while the work was being subscribed (take(1) of a value emitted at once): the
          // teardown found no subscription to end, so end it now, or the work runs on after the release.
          if (subscriber.closed) work.unsubscribe();
        },
        options.newScope,
      );
    })().catch((error: unknown) => {
      if (handle) {
        // run() itself threw: that is the work's error.
        end(() => subscriber.error(error));
      } else {
        finish();
        if (!subscriber.closed) subscriber.error(options.mapError ? options.mapError(error) : error);
      }
    });

    return () => {
      // Only a wait still under way has anything to abort: an abort with no reason builds a DOMException
      // (a stack trace), about 45 µs of every decorated request when it ran at every teardown.
      if (!handle) waiting.abort();
      if (handle && !ended) cancelCall();
      work?.unsubscribe();
      void release();
    };
  });
}

/**
 * Waits for the work's promises, saying so in the log every PENDING_WORK_WARN_MS they keep the lock;
 * or until the lock is gone anyway (its signal aborted: lost, or given up as the module closed), when
 * waiting guards nothing any more and must leave no timer behind.
 */
async function settledOrWarn(
  pending: PendingWork,
  lock: ServiceHold['lock'],
  logger: RedisLockRuntime['logger'],
): Promise<void> {
  const { name, signal } = lock;
  if (signal.aborted) return;
  const since = monotonicNow();
  const timer = setInterval(() => {
    logger.warn(messages.workStillPending(name, pending.size, Math.round((monotonicNow() - since) / 1_000)));
  }, PENDING_WORK_WARN_MS);
  let stopListening!: () => void;
  // Through the fan-out: one listener on the hold's signal however many re-entries of it wait here.
  const lockGone = new Promise<void>((resolve) => (stopListening = onAbort(signal, resolve)));
  try {
    await Promise.race([pending.settled(), lockGone]);
  } finally {
    clearInterval(timer);
    stopListening();
  }
}

/** When `value`, if it is a stream being sent (a StreamableFile or a Readable), has ended or been destroyed. */
function streamSent(value: unknown): Promise<void> | undefined {
  const v = value as { getStream?: () => unknown; pipe?: unknown; on?: unknown } | null;
  if (v === null || typeof v !== 'object') return undefined;
  const stream = (typeof v.getStream === 'function' ? v.getStream() : v) as NodeJS.ReadableStream;
  if (typeof stream?.pipe !== 'function' || typeof stream.on !== 'function') return undefined;
  return outsideWork(() => new Promise<void>((resolve) => finished(stream, () => resolve())));
}
