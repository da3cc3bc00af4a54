import type { GroupLockContext } from '../../engine/groups/group-lock';
import type { LockContext, ReleaseOutcome } from '../../engine/holds/lock-handle';
import type { ActiveLock } from './active-lock';

/** A lock `LockService.hold` acquired: what the work sees of it, and how to release it. */
export interface ServiceHold {
  readonly lock: ActiveLock;
  release(): Promise<ReleaseOutcome>;
}

/** The `ActiveLock` view of an engine hold of `names` (one lock, a MultiLock or a RedLock). */
export function activeLockOf(
  names: readonly string[],
  kind: ActiveLock['kind'],
  context: LockContext | GroupLockContext,
): ActiveLock {
  const tokens = 'fencingTokens' in context ? context.fencingTokens : [context.fencingToken];
  return {
    name: names.join('+'),
    names,
    kind,
    get signal() {
      return context.signal;
    },
    fencingToken: tokens.find((t) => t !== null) ?? 0,
    fencingTokens: tokens,
    extend: (leaseTime?: number) => context.extend(leaseTime),
  };
}

/**
 * `lock` as one call sees it: its `signal` also aborts when `cancelled` does (the call's caller went
 * away, see lockedObservable). The combined signal is made only if read.
 */
export function cancellableLock(lock: ActiveLock, cancelled: AbortSignal): ActiveLock {
  let signal: AbortSignal | undefined;
  return {
    name: lock.name,
    names: lock.names,
    kind: lock.kind,
    get signal() {
      return (signal ??= AbortSignal.any([lock.signal, cancelled]));
    },
    fencingToken: lock.fencingToken,
    fencingTokens: lock.fencingTokens,
    extend: (leaseTime?: number) => lock.extend(leaseTime),
  };
}
