/**
 * Many waits share one signal (the Nest module's shutdown signal, a caller's own): one 'abort'
 * listener per signal fans out to all of them, so 1,000 waiters add one listener, not 1,000 (Node
 * warns past 10) and none is left behind when a wait ends.
 */
const callbacks = new WeakMap<AbortSignal, Set<() => void>>();

/** Calls `callback` when `signal` aborts; the returned function stops that (call it when done waiting). */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
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
