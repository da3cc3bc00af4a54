import type { GroupLockContext } from '../../engine/group-lock';
import type { LockContext, ReleaseOutcome } from '../../engine/lock-handle';
import type { ActiveLock } from './active-lock';

/** A lock `LockService.hold` acquired: what the work sees of it, and how to release it. */
export interface HeldLock {
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
