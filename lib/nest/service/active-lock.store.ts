import { AsyncLocalStorage } from 'node:async_hooks';
import type { ActiveLock } from './active-lock';

// Process-wide by nature, like the engine's lock scope: it follows the async call chain, whichever
// application started it.
const activeLocks = new AsyncLocalStorage<ActiveLock>();

/** The innermost lock held around the current call chain, if any. */
export function currentLock(): ActiveLock | undefined {
  return activeLocks.getStore();
}

/** Runs `fn` (and everything it calls) with `lock` as the current lock. */
export function runWithActiveLock<T>(lock: ActiveLock, fn: () => T): T {
  return activeLocks.run(lock, fn);
}
