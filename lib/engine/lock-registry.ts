import type { LockLostReason } from './errors';
import { HeldLock, heldLockId, type RenewalKind } from './held-lock';
import type { LockHandleOps } from './lock-handle';
import type { Watchdog } from './watchdog';

export interface Acquisition {
  name: string;
  key: string;
  owner: string;
  leaseMs: number;
  watched: boolean;
  fencingToken: number;
  renewal: RenewalKind;
  /** The keys a renewal touches (default: `key`). */
  renewalKeys?: readonly string[];
  ops: LockHandleOps;
  sentAt: number;
  /** AcquireOptions.label of the first hold. */
  label?: string;
  /** The script reported a re-entry (the owner already held the lock). */
  reentered: boolean;
}

/**
 * The locks this client holds, one record per (lock key, owner). It keeps the watchdog's list in
 * step: a lock is watched as soon as it is recorded and unwatched before its final release is sent,
 * so a renewal never outlives the lock.
 */
export class LockRegistry {
  private readonly locks = new Map<string, HeldLock>();
  /** Releases and undos still being sent through an outage, per (lock key, holder). */
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(
    private readonly watchdog: Watchdog,
    private readonly onLost: (lock: HeldLock, reason: LockLostReason) => void,
  ) {}

  /**
   * Marks `operation` (an idempotent release or undo of `owner`'s hold, retried through an outage) as
   * in flight until it settles. The same owner's next acquisition waits for it (`settled`): a repeat
   * that landed after a new grant could otherwise take that grant back.
   */
  inFlightFor(key: string, owner: string, operation: Promise<unknown>): void {
    const id = heldLockId(key, owner);
    const tracked = operation.finally(() => {
      if (this.inFlight.get(id) === tracked) this.inFlight.delete(id);
    });
    this.inFlight.set(id, tracked);
  }

  /** Resolves once nothing of `owner` on `key` is still being sent (usually at once). */
  settled(key: string, owner: string): Promise<unknown> | undefined {
    return this.inFlight.size === 0 ? undefined : this.inFlight.get(heldLockId(key, owner))?.catch(() => undefined);
  }

  get size(): number {
    return this.locks.size;
  }

  get(key: string, owner: string): HeldLock | undefined {
    return this.locks.get(heldLockId(key, owner));
  }

  /** The first record of `key` whose owner id satisfies `match`. */
  find(key: string, match: (owner: string) => boolean): HeldLock | undefined {
    for (const lock of this.locks.values()) if (lock.key === key && match(lock.owner)) return lock;
    return undefined;
  }

  all(): HeldLock[] {
    return [...this.locks.values()];
  }

  record(a: Acquisition): HeldLock {
    const existing = this.locks.get(heldLockId(a.key, a.owner));
    if (existing && a.reentered) {
      existing.holdCount++;
      if (a.watched && !existing.watched) {
        existing.watched = true;
        existing.leaseMs = a.leaseMs;
        existing.disarmExpiry();
      }
      if (existing.watched) this.watchdog.watch(existing); // also after a release that failed
      return existing;
    }
    // A fresh grant while we still had a record means the old hold expired unnoticed.
    if (existing) this.onLost(existing, 'lease-expired');
    const lock = new HeldLock(
      a.name,
      a.key,
      a.owner,
      a.leaseMs,
      a.watched,
      a.fencingToken,
      a.renewal,
      a.ops,
      a.sentAt,
      a.renewalKeys,
    );
    lock.label = a.label;
    this.locks.set(lock.id, lock);
    if (lock.watched) this.watchdog.watch(lock);
    else lock.armExpiry(this.onLost);
    return lock;
  }

  /**
   * Before sending a release: counts the hold as released at once (so concurrent releases of one
   * owner each expect the right count) and stops renewals when it is the last one.
   */
  beginRelease(lock: HeldLock): { expectedHolds: number; final: boolean } {
    const expectedHolds = Math.max(1, lock.holdCount);
    lock.holdCount = expectedHolds - 1;
    const final = lock.holdCount === 0;
    if (final) this.watchdog.unwatch(lock);
    return { expectedHolds, final };
  }

  /** The release failed for a reason other than an unreachable Redis: the hold is still ours. */
  releaseFailed(lock: HeldLock, final: boolean): void {
    lock.holdCount++;
    if (final) this.stillHeld(lock);
  }

  /**
   * Redis says holds remain although we sent what we took for the last release: keep renewing.
   * (A release that failed to reach Redis does NOT resume renewals: whoever gave up on the lock must
   * not keep it alive forever; it runs out with its lease unless a retried release gets there first.)
   */
  stillHeld(lock: HeldLock): void {
    if (lock.watched && !lock.lost && this.locks.get(lock.id) === lock) this.watchdog.watch(lock);
  }

  /** Redis reports the last hold released. */
  released(lock: HeldLock): void {
    lock.released = true;
    this.forget(lock);
  }

  /** Redis reports holds remain. */
  decremented(lock: HeldLock, wasFinal: boolean): void {
    if (!wasFinal) return;
    // A re-entry that was in flight when the last release was sent holds it now: keep renewing. With
    // none, Redis counted an acquisition whose reply never came: stop renewing, so it runs out.
    if (lock.holdCount > 0) this.stillHeld(lock);
    else this.forget(lock);
  }

  forget(lock: HeldLock): void {
    this.watchdog.unwatch(lock);
    lock.disarmExpiry();
    if (this.locks.get(lock.id) === lock) this.locks.delete(lock.id);
  }
}
