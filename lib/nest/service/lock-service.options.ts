import type { AcquireOptions } from '../../engine/lock/acquire-options';

/**
 * The lock kinds one Redis deployment offers: `reentrant` (Redisson RLock, the default), `fair`
 * (FIFO, re-entrant, excludes the reentrant lock of the same name) and `simple` (`SET NX PX`, not
 * re-entrant, 3 s wait and lease unless told otherwise).
 */
export type SingleLockKind = 'reentrant' | 'fair' | 'simple';

/** The single-deployment kinds, plus `redlock`: a majority of the module's `redLock.masters`. */
export type LockKind = SingleLockKind | 'redlock';

export const LOCK_KINDS: readonly LockKind[] = ['reentrant', 'fair', 'simple', 'redlock'];
export const SINGLE_LOCK_KINDS: readonly SingleLockKind[] = ['reentrant', 'fair', 'simple'];

/** How `LockService` acquires: the engine's AcquireOptions plus the kind and the module's defaults. */
export interface LockCallOptions extends Omit<AcquireOptions, 'waitTime' | 'leaseTime'> {
  /** Default 'reentrant'. */
  kind?: SingleLockKind;
  /**
   * Longest wait for a held lock, in ms; `0` = a single attempt; `Infinity` = until it is free.
   * Omitted: the module's `waitTime`, else until it is free (3 s for the simple lock).
   */
  waitTime?: number;
  /**
   * Lease in ms, after which the lock expires unless extended; `'watchdog'` = renewed while held.
   * Omitted: the module's `leaseTime`, else the watchdog (3 s for the simple lock).
   */
  leaseTime?: number | 'watchdog';
}

/** `LockService.withLock` options. */
export interface WithLockCallOptions extends Omit<LockCallOptions, 'kind'> {
  /** Default 'reentrant'. `redlock` takes one name. */
  kind?: LockKind;
  /**
   * Makes the name a semaphore with this many permits (whole number >= 1) and takes one of them:
   * at most `permits` calls run at once, across every instance. One name, no `kind`.
   */
  permits?: number;
  /**
   * A read-write lock instead: `read` holds are shared, `write` is exclusive (a waiting writer holds
   * back new readers). Its keys are apart from the plain lock of the same name. No `kind`.
   */
  mode?: 'read' | 'write';
  /** Run in a fresh owner scope, so the callback does not re-enter locks its caller holds. Default false. */
  newScope?: boolean;
}
