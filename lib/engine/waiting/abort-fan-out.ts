/**
 * Many waits share one signal (the Nest module's shutdown signal, a caller's own): one 'abort'
 * listener per signal fans out to all of them, so 1,000 waiters add one listener, not 1,000 (Node
 * warns past 10) and none is left behind when a wait ends.
 */
const callbacks = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Several signals a wait stops for, seen as one without an AbortController of its own (see
 * ClosingWaits.signalFor): `reason` is the aborted one's, and `onAbort` listens through each part.
 */
export interface CombinedSignal {
  readonly parts: readonly AbortSignal[];
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
}

/** What a wait stops for: one signal, or a combination of several. */
export type WaitSignal = AbortSignal | CombinedSignal;

/** Calls `callback` (once) when `signal` aborts; the returned function stops that (call it when done waiting). */
export function onAbort(signal: WaitSignal, callback: () => void): () => void {
  if (!(signal instanceof AbortSignal)) return onAnyAbort(signal.parts, callback);
  // Aborted already: its 'abort' event is over and will not come again. Called next (a caller that
  // checked the signal before a round trip, then listens, would otherwise wait out its whole timer).
  if (signal.aborted) return soonUnlessStopped(callback);
  let waiting = callbacks.get(signal);
  if (!waiting) {
    const created = new Set<() => void>();
    waiting = created;
    callbacks.set(signal, created);
    signal.addEventListener(
      'abort',
      () => {
        callbacks.delete(signal);
        for (const call of created) call();
      },
      { once: true },
    );
  }
  const set = waiting;
  set.add(callback);
  return () => void set.delete(callback);
}

/** `callback` at the first of `signals` to abort, once. */
function onAnyAbort(signals: readonly AbortSignal[], callback: () => void): () => void {
  let called = false;
  const once = (): void => {
    if (called) return;
    called = true;
    stop();
    callback();
  };
  const stops = signals.map((signal) => onAbort(signal, once));
  const stop = (): void => stops.forEach((s) => s());
  return stop;
}

/** `callback` in a microtask, unless the returned function is called first. */
function soonUnlessStopped(callback: () => void): () => void {
  let stopped = false;
  queueMicrotask(() => stopped || callback());
  return () => void (stopped = true);
}
