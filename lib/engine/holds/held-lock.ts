import { leaseEnd, monotonicNow } from '../util/clock';
import { LockLostError, type LockLostReason } from '../errors';
import type { ReleaseOutcome } from './release-outcome';
import { setLongTimeout, type LongTimer } from '../util/long-timer';
import type { LeaseFrom } from '../util/server-clock';

/**
 * How a lock is renewed: `held` when the owner is a field of the lock hash and its holds are recorded
 * by id (reentrant and fair locks, a read-write lock's write side; renewalKeys: the hash, then its hold
 * ids), `hash` the same without hold ids, `string` when the lock's value is the owner's token (simple
 * lock), `read` for a read hold (its expiry in the readers zset; renewalKeys: that zset, the read
 * counts, then the read hold ids), `permit` when the owner is a member of a semaphore's holds (its
 * score the lease's end).
 */
export type RenewalKind = 'hash' | 'held' | 'string' | 'read' | 'permit';

/** How the lock kind that granted a hold releases and extends it (LockBase's own steps). */
export interface HoldOps {
  /** Releases hold `holdId` of `lock` (none given: its newest). */
  release(lock: HeldLock, holdId?: string): Promise<ReleaseOutcome>;
  /** `onLanded`: the master set the lease (before any wait for its replicas, see extendHold). */
  extend(lock: HeldLock, leaseTime?: number, onLanded?: () => void): Promise<void>;
}

/** One grant as the kind that won it records it. */
export interface Acquisition {
  name: string;
  key: string;
  /** The id Redis records the hold under, which renewals and releases name. */
  owner: string;
  /** This hold's own id (see lua/include/hold-ids.lua): made for the attempt that took it. */
  holdId: string;
  leaseMs: number;
  watched: boolean;
  fencingToken: number;
  renewal: RenewalKind;
  /** The keys a renewal touches (default: `key`). */
  renewalKeys?: readonly string[];
  ops: HoldOps;
  sentAt: number;
  /**
   * Set when Redis gave the hold a shorter first lease than `leaseMs`, not from `sentAt` (a grant handed
   * over in a message): the holder believes only that until a renewal of its own lands.
   */
  firstLease?: LeaseFrom;
  /** AcquireOptions.label of the first hold. */
  label?: string;
  /** The script reported a re-entry (the owner already held the lock). */
  reentered: boolean;
}

/**
 * What a hold needs of the registry that records it (LockRegistry): the share of a lease given to
 * drift, the watchdog's list, and word of a loss or a release.
 */
export interface HoldRecords {
  readonly driftFactor: number;
  readonly watchdog: { watch(lock: HeldLock): void; unwatch(lock: HeldLock): void };
  reportLoss(error: LockLostError): void;
  isCurrent(lock: HeldLock): boolean;
  remove(lock: HeldLock): void;
}

/**
 * A lock this client holds for one owner, through its whole life: recorded at the grant (in
 * `registry`), re-entered, renewed by the watchdog or extended, then released or lost. Every handle of
 * a reentrant hold shares it. The watchdog's list is kept in step: a hold is watched as soon as it is
 * recorded and unwatched before its final release is sent, so a renewal never outlives the lock.
 */
export class HeldLock {
  /** Made when first asked for: most holds are released without anyone reading their signal. */
  private abortController?: AbortController;
  readonly name: string;
  readonly key: string;
  /** The id Redis records the hold under (renewals and releases name it). */
  readonly owner: string;
  leaseMs: number;
  /** Renewed by the watchdog (no explicit leaseTime). */
  watched: boolean;
  readonly fencingToken: number;
  readonly renewal: RenewalKind;
  /** The keys a renewal touches, in renew-many-n.lua's order for `renewal`. */
  readonly renewalKeys: readonly string[];
  /** The lock kind that releases and extends it. */
  private readonly ops: HoldOps;
  /** The ids of the holds this client has, oldest first (see lua/include/hold-ids.lua). */
  private readonly holdIds: string[];
  lost = false;
  /**
   * Redis reported the owner's last hold released; later releases of it are no-ops ('expired' when
   * holds were still counted here: see markReleased).
   */
  released = false;
  /**
   * When this side takes the lease for over (monotonicNow ms): a drift margin before Redis can let it run
   * out, counted from when the command that set it was sent (see leaseEnd).
   */
  expiresAt: number;
  /** For explicit leases: fires when the lease runs out, so the holder learns it at once. */
  private expiryTimer?: LongTimer;
  /** A first lease still to replace (see Acquisition.firstLease): its renewal at half, then its end. */
  private firstLeaseTimer?: NodeJS.Timeout;
  private onFirstLease: boolean;
  /** AcquireOptions.label of the first hold, for events and metrics. */
  readonly label?: string;
  /** When this client learnt of the grant (monotonicNow ms). */
  readonly grantedAt = monotonicNow();
  /**
   * The record's first hold: when its command was sent (monotonicNow ms), and whether Redis reported it a
   * re-entry of a hold this client had no record of (see LockRegistry.record).
   */
  readonly firstSentAt: number;
  readonly firstReentered: boolean;
  /**
   * Told of each watchdog renewal Redis confirmed: when it was sent (performance.now()) and the lease
   * it set. A RedLock's vote uses it to follow its master's lease on a clock no NTP step moves.
   */
  onRenewed?: (sentAtMonotonic: number, leaseMs: number) => void;
  /** False for a RedLock's vote: the RedLock reports its own loss, a master's is not one. */
  reportsLoss = true;
  /** Told of the loss once it is marked (a RedLock's vote: its RedLock counts what is left of its quorum). */
  onLost?: (error: LockLostError) => void;

  /** Recorded by `registry` (see LockRegistry.record), which keeps it until it is released or lost. */
  constructor(
    private readonly registry: HoldRecords,
    a: Acquisition,
  ) {
    this.name = a.name;
    this.key = a.key;
    this.owner = a.owner;
    this.leaseMs = a.leaseMs;
    this.watched = a.watched;
    this.fencingToken = a.fencingToken;
    this.renewal = a.renewal;
    this.renewalKeys = a.renewalKeys ?? [a.key];
    this.ops = a.ops;
    this.label = a.label;
    this.holdIds = [a.holdId];
    this.firstSentAt = a.sentAt;
    this.firstReentered = a.reentered;
    this.id = heldLockId(a.key, a.owner);
    // When the acquiring command was sent: the lease cannot have started earlier.
    const first = a.firstLease;
    this.onFirstLease = first !== undefined;
    this.expiresAt = first ? this.leaseEndFrom(first.sentAt, first.leaseMs) : this.leaseEndFrom(a.sentAt, a.leaseMs);
  }

  /** Holds this client has (1 = first acquisition). */
  get holdCount(): number {
    return this.holdIds.length;
  }

  /**
   * Redis set this hold's lease to `leaseMs` with a command sent at `sentAt` (a renewal, `extend()`).
   * `outright`: set shorter or not (`extend(leaseTime)`). A renewal sent before such a setting ran
   * before it (one connection keeps the order): its answer, however late, says nothing of the lease now.
   */
  leaseSet(sentAt: number, leaseMs: number, outright = false): void {
    if (sentAt < this.setOutrightAt) return;
    if (outright) this.setOutrightAt = sentAt;
    this.expiresAt = this.leaseEndFrom(sentAt, leaseMs);
  }

  /** When the last command that set the lease outright was sent (see leaseSet). */
  private setOutrightAt = -Infinity;

  /**
   * A watched hold's lease was just set outright, maybe to less than the watchdog's next round is away:
   * this hold alone renews it at its half, and its end is reported as a loss unless that renewal landed
   * first, as a hand-over's first lease is (see watchFirstLease). The watchdog goes on as before.
   */
  leaseSetWhileWatched(): void {
    this.onFirstLease = true;
    this.watchFirstLease();
  }

  /** When the holder must take such a lease for over: a drift margin before Redis's end (see leaseEnd). */
  private leaseEndFrom(sentAt: number, leaseMs: number): number {
    return leaseEnd(sentAt, leaseMs, this.registry.driftFactor);
  }

  /** Whether hold `holdId` is one this client still has. */
  has(holdId: string): boolean {
    return this.holdIds.includes(holdId);
  }

  get controller(): AbortController {
    return (this.abortController ??= new AbortController());
  }

  /** The registry's key for this hold (made once: the registry looks it up at every grant and release). */
  readonly id: string;

  /** The owner took it again (`a`): one more hold, renewed by the watchdog if `a` asked for it. */
  reenter(a: Acquisition): void {
    this.holdIds.push(a.holdId);
    if (a.watched && !this.watched) {
      this.watched = true;
      this.leaseMs = a.leaseMs;
      this.disarmExpiry();
      // The re-entry made the lease at least its own (see leaseFromReentry): the watchdog's deadline
      // counts from that, not from the shorter explicit lease before it.
      this.expiresAt = Math.max(this.expiresAt, this.leaseEndFrom(a.sentAt, a.leaseMs));
    } else if (!this.watched) this.leaseFromReentry(a);
    if (this.watched) this.registry.watchdog.watch(this); // also after a release that failed
  }

  /**
   * Re-entry `holdId` is not in Redis after all (a failover lost it): its hold goes, and the lease is
   * believed to end no later than `expiresAt`, as before it.
   */
  undoReentry(holdId: string, expiresAt: number): void {
    const at = this.holdIds.indexOf(holdId);
    if (at < 0) return;
    this.holdIds.splice(at, 1);
    if (this.holdIds.length === 0) return this.forget();
    this.expiresAt = Math.min(this.expiresAt, expiresAt);
    if (!this.watched) this.armExpiry();
  }

  /**
   * An explicit re-entry made the lease in Redis at least `a.leaseMs` long from when it ran (never
   * shorter): the local expiry follows, so the holder is not told of a loss while Redis still holds it.
   */
  private leaseFromReentry(a: Acquisition): void {
    const until = this.leaseEndFrom(a.sentAt, a.leaseMs); // it ran after it was sent: Redis's lease ends no earlier
    if (until <= this.expiresAt || this.lost) return;
    this.expiresAt = until;
    this.leaseMs = Math.max(this.leaseMs, a.leaseMs);
    this.armExpiry();
  }

  /** Releases hold `holdId` (none given: the newest; see LockBase's release). */
  release(holdId?: string): Promise<ReleaseOutcome> {
    return this.ops.release(this, holdId);
  }

  /** Renews the lease now, or sets it to `leaseTime` ms (see LockBase's extend). */
  extend(leaseTime?: number): Promise<void> {
    return this.ops.extend(this, leaseTime);
  }

  /** Once recorded: the watchdog renews a watched hold; an explicit lease's end is reported when it comes. */
  keepAlive(): void {
    if (this.onFirstLease) this.watchFirstLease();
    if (this.watched) this.registry.watchdog.watch(this);
    else this.armExpiry();
  }

  /**
   * A hand-over's short lease is renewed to the hold's own lease at its half, by this hold alone (the
   * watchdog's round may come far later), and its end is reported as a loss, watched or not, unless that
   * renewal landed first. One timer at a time (the end's is armed when the renewal is sent): most holds
   * are released long before the half, and a hot semaphore sets and clears it at every acquisition.
   */
  private watchFirstLease(): void {
    this.clearFirstLease();
    const left = Math.max(0, this.expiresAt - monotonicNow());
    this.firstLeaseTimer = setTimeout(() => this.renewFirstLease(), left / 2);
    this.firstLeaseTimer.unref();
  }

  private renewFirstLease(): void {
    if (this.holdCount === 0) return; // its last release was sent meanwhile: nothing to renew or lose
    const left = this.expiresAt - monotonicNow();
    // Woken past the end (a stalled process): the lease may be over in Redis already.
    if (left <= 0) return this.markLost('lease-expired');
    this.firstLeaseTimer = setTimeout(() => this.markLost('lease-expired'), left);
    this.firstLeaseTimer.unref();
    // The master's answer replaces the first lease: a wait for its replicas after it (replica sync)
    // may outlast the first lease, and must not be told as a loss Redis never made. If the renewal
    // still fails (its master went before a replica had it), extend reports the loss, or the first
    // lease's end does.
    const replaced = () => this.firstLeaseReplaced();
    void this.ops.extend(this, undefined, replaced).then(replaced, () => this.firstLeaseFailed());
  }

  private firstLeaseReplaced(): void {
    this.onFirstLease = false;
    this.clearFirstLease();
  }

  /** The first lease's renewal failed: the hold is lost at that lease's end, if not told so already. */
  private firstLeaseFailed(): void {
    this.clearFirstLease();
    // Lost already, or given back while the renewal was on its way: no loss to tell.
    if (this.lost || this.holdCount === 0) return;
    const left = this.expiresAt - monotonicNow();
    if (left <= 0) return this.markLost('lease-expired');
    this.firstLeaseTimer = setTimeout(() => this.markLost('lease-expired'), left);
    this.firstLeaseTimer.unref();
  }

  private clearFirstLease(): void {
    if (!this.firstLeaseTimer) return;
    clearTimeout(this.firstLeaseTimer);
    this.firstLeaseTimer = undefined;
  }

  /** Explicit leases only: arm (or re-arm) the timer that reports the lease running out. */
  armExpiry(): void {
    this.disarmExpiry();
    if (this.watched) return;
    // Chunked past setTimeout's limit: a 30-day lease must not be reported lost 1 ms in.
    this.expiryTimer = setLongTimeout(() => this.markLost('lease-expired'), this.expiresAt - monotonicNow());
  }

  private disarmExpiry(): void {
    this.expiryTimer?.clear();
    this.expiryTimer = undefined;
  }

  /**
   * Before sending a release: counts the hold as released at once (so concurrent releases of one
   * owner each expect the right count) and stops renewals when it is the last one.
   */
  beginRelease(holdId?: string): { final: boolean; holdId: string } {
    const at = holdId === undefined ? this.holdIds.length - 1 : this.holdIds.indexOf(holdId);
    const [released] = this.holdIds.splice(at, 1);
    const final = this.holdIds.length === 0;
    if (final) {
      this.registry.watchdog.unwatch(this);
      this.clearFirstLease();
    }
    return { final, holdId: released };
  }

  /** The release of `holdId` failed for a reason other than an unreachable Redis: the hold is still ours. */
  releaseFailed(final: boolean, holdId: string): void {
    this.holdIds.push(holdId);
    if (final) this.stillHeld();
  }

  /**
   * Redis says holds remain although we sent what we took for the last release: keep renewing.
   * (A release that failed to reach Redis does NOT resume renewals: whoever gave up on the lock must
   * not keep it alive forever; it runs out with its lease unless a retried release gets there first.)
   */
  private stillHeld(): void {
    if (this.lost || !this.registry.isCurrent(this)) return;
    if (this.onFirstLease) this.watchFirstLease();
    if (this.watched) this.registry.watchdog.watch(this);
  }

  /**
   * Redis reports the owner's last hold released. Holds this record still counts are gone then:
   * another process's `unlock({ owner })` ended one of them, so their holders must stop.
   */
  markReleased(): void {
    this.released = true;
    if (this.holdCount > 0) return this.markLost('not-owner');
    this.forget();
  }

  /** Redis reports holds remain. */
  markDecremented(wasFinal: boolean): void {
    if (!wasFinal) return;
    // A re-entry that was in flight when the last release was sent holds it now: keep renewing. With
    // none, Redis counted an acquisition whose reply never came: stop renewing, so it runs out.
    if (this.holdCount > 0) this.stillHeld();
    else this.forget();
  }

  /**
   * The lock is no longer ours (it ran out, or someone else holds it): aborts the holder's signal with
   * a LockLostError, which the client logs and emits as 'lockLost'. Reported once.
   */
  markLost(reason: LockLostReason): void {
    if (this.lost) return;
    this.lost = true;
    this.forget();
    const error = new LockLostError(this.name, this.owner, reason);
    this.controller.abort(error);
    this.onLost?.(error);
    if (this.reportsLoss) this.registry.reportLoss(error);
  }

  /** Nothing of ours is left to renew or release: drops the record. */
  forget(): void {
    this.registry.watchdog.unwatch(this);
    this.disarmExpiry();
    this.clearFirstLease();
    this.registry.remove(this);
  }
}

export function heldLockId(key: string, owner: string): string {
  return `${key}\u0000${owner}`;
}
