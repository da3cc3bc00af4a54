import { DEFAULT_DRIFT_FACTOR } from '../util/clock';
import type { LockLostError } from '../errors';
import { HeldLock, heldLockId, type Acquisition } from './held-lock';
import type { Watchdog } from './watchdog';

/**
 * The locks this client holds, one record per (lock key, owner) (see HeldLock for the life of one),
 * and the releases of them still being sent through an outage.
 */
export class LockRegistry {
  private readonly locks = new Map<string, HeldLock>();
  /** Releases and undos still being sent through an outage, per (lock key, holder). */
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(
    /** Renews the watched holds. */
    readonly watchdog: Watchdog,
    /** Logs a lost hold and emits it as 'lockLost' (the client's). */
    readonly reportLoss: (error: LockLostError) => void,
    /** The share of each lease a holder gives up to clock drift (see leaseEnd). */
    readonly driftFactor: number = DEFAULT_DRIFT_FACTOR,
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

  /** The record of `owner`'s hold on `key` (`owner`: the id Redis records it under). */
  get(key: string, owner: string): HeldLock | undefined {
    return this.locks.get(heldLockId(key, owner));
  }

  /** The first record of `key` whose owner satisfies `match`. */
  find(key: string, match: (owner: string) => boolean): HeldLock | undefined {
    for (const lock of this.locks.values()) if (lock.key === key && match(lock.owner)) return lock;
    return undefined;
  }

  /** Whether hold `holdId` of `key` is one this client has (whichever owner it is recorded for). */
  hasHold(key: string, holdId: string): boolean {
    for (const lock of this.locks.values()) if (lock.key === key && lock.has(holdId)) return true;
    return false;
  }

  all(): HeldLock[] {
    return [...this.locks.values()];
  }

  /** A grant: one more hold of the owner's record, or a new record. */
  record(a: Acquisition): HeldLock {
    const existing = this.locks.size === 0 ? undefined : this.get(a.key, a.owner);
    if (existing && (a.reentered || sameEpoch(existing, a) || sameReadHold(existing, a))) {
      existing.reenter(a);
      return existing;
    }
    // A fresh grant while we still had a record means the old hold expired unnoticed.
    if (existing) existing.markLost('lease-expired');
    const lock = new HeldLock(this, a);
    this.locks.set(lock.id, lock);
    lock.keepAlive();
    return lock;
  }

  /** Whether `lock` is still the record of its key and owner (a newer grant replaces it). */
  isCurrent(lock: HeldLock): boolean {
    return this.locks.get(lock.id) === lock;
  }

  remove(lock: HeldLock): void {
    if (this.isCurrent(lock)) this.locks.delete(lock.id);
  }
}

/**
 * Whether first grant `a` is of the epoch the owner's live record `existing` holds in: a lock whose
 * first grants each take a new fencing token and whose re-entries report the current one (holds
 * recorded by id: reentrant and fair locks, a write lock). Two waits of one owner: the lock handed to
 * one in a message, the other's retry re-entering before this process heard the message, so the
 * re-entry is recorded first. Both holds are Redis's; neither may be counted as lost.
 */
function sameEpoch(existing: HeldLock, a: Acquisition): boolean {
  return a.renewal === 'held' && !existing.lost && existing.fencingToken === a.fencingToken;
}

/**
 * Whether first read grant `a` is the hold the owner's live record `existing` re-entered: a read hold's
 * token is the last write's, the same for every read hold between two writes, so it cannot tell. An
 * attempt whose reply was lost is claimed later (its sentAt is the attempt's); a record this client
 * began meanwhile with a re-entry sent after that attempt re-entered a hold that landed before it, on the
 * same connection: the attempt's own, when the claim finds it live (the owner has held since it landed).
 * A record begun before the attempt was sent held nothing when it landed (a first grant): that is lost.
 */
function sameReadHold(existing: HeldLock, a: Acquisition): boolean {
  return a.renewal === 'read' && !existing.lost && existing.firstReentered && existing.firstSentAt > a.sentAt;
}
