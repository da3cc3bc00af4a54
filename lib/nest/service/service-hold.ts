import type { GroupLockContext } from '../../engine/groups/group-lock';
import type { LockContext, ReleaseOutcome } from '../../engine/holds/lock-handle';
import type { ActiveLock } from './active-lock';
import { eitherSignal, type ShutdownBoundSignal } from './until-shutdown';

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
 * away, see lockedObservable). The combined signal is made only if read; `stop()` once the call ended.
 * Not `AbortSignal.any`: on Node 20 each signal it makes stays referenced from the hold's signal until
 * that one is collected, so nested calls re-entering a long-held lock kept one per call (see eitherSignal).
 */
export function cancellableLock(lock: ActiveLock, cancelled: AbortSignal): { lock: ActiveLock; stop(): void } {
  let combined: ShutdownBoundSignal | undefined;
  let stopped = false;
  return {
    lock: {
      name: lock.name,
      names: lock.names,
      kind: lock.kind,
      get signal() {
        // Read after the call ended: nothing to listen to any more but what already happened.
        if (stopped && !combined) return cancelled.aborted ? cancelled : lock.signal;
        return (combined ??= eitherSignal(lock.signal, cancelled)).signal;
      },
      fencingToken: lock.fencingToken,
      fencingTokens: lock.fencingTokens,
      extend: (leaseTime?: number) => lock.extend(leaseTime),
    },
    stop: () => {
      stopped = true;
      combined?.stop();
    },
  };
}
