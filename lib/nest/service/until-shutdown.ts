import { onAbort } from '../../engine/waiting/abort-fan-out';

/** What one acquisition of LockService waits with, and how to stop listening once it settled. */
export interface ShutdownBoundSignal {
  signal: AbortSignal;
  stop(): void;
}

const noop = (): void => undefined;

/**
 * The caller's signal `own`, aborted also when the module shuts down (`shutdown`, with its reason), for
 * one acquisition: `stop()` once that settled. Not `AbortSignal.any`: on Node 20 each signal it makes
 * stays referenced from its long-lived source, the module's shutdown signal, for good (about 55 bytes a
 * call, never collected, and some 20 µs of CPU each): every decorated call leaked. Listened to through
 * the fan-out (see onAbort), nothing is left once stopped.
 */
export function untilShutdown(own: AbortSignal | undefined, shutdown: AbortSignal): ShutdownBoundSignal {
  return own === undefined ? { signal: shutdown, stop: noop } : eitherSignal(own, shutdown);
}

/** A signal that aborts with the reason of the first of `first`, `second` to abort (see untilShutdown); `stop()` when done. */
export function eitherSignal(first: AbortSignal, second: AbortSignal): ShutdownBoundSignal {
  const either = new AbortController();
  if (first.aborted || second.aborted) {
    either.abort(first.aborted ? first.reason : second.reason);
    return { signal: either.signal, stop: noop };
  }
  const stops = [onAbort(first, () => either.abort(first.reason)), onAbort(second, () => either.abort(second.reason))];
  return { signal: either.signal, stop: () => stops.forEach((stop) => stop()) };
}

/** Calls `abort` with `shutdown`'s reason when it aborts (at once if it has); returns how to stop that. */
export function abortAtShutdown(shutdown: AbortSignal, abort: (reason: unknown) => void): () => void {
  if (shutdown.aborted) {
    abort(shutdown.reason);
    return noop;
  }
  return onAbort(shutdown, () => abort(shutdown.reason));
}
