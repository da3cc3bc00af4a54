import { LockLostError, type LockLostReason } from '../errors';
import { checkDuration, LEASE_RULE } from '../util/validation';
import type { EmitLockEvent } from '../client/lock-events';
import type { LockHandle, ReleaseOutcome } from '../holds/lock-handle';
import { monotonicNow } from '../util/clock';
import { validityClock, type ValidityEnd } from './validity-clock';
import type { GroupLockHandle } from './group-lock';

/** What a RedLock handle asks of its RedLock: the quorum, each master's state, and where to report. */
export interface RedLockQuorum {
  readonly name: string;
  readonly quorum: number;
  readonly emit: EmitLockEvent;
  reportLoss(error: LockLostError): void;
  /** LockOptionsError for a lease no round could grant with any validity (see RedLock.checkLease). */
  checkLease(leaseTime: number | undefined): void;
  drift(lease: number): number;
  usable(index: number): boolean;
  boundedOn<T>(index: number, operation: Promise<T>, what: string, timeoutMs: number): Promise<T>;
  /**
   * Follows a release (or take-back) on master `index` with one handler: `settled` hears its outcome
   * (`expired` when it failed), or undefined when it did not answer within `timeoutMs` (the master is
   * then skipped); once.
   */
  followRelease(
    index: number,
    release: Promise<ReleaseOutcome>,
    timeoutMs: number,
    settled: (outcome?: ReleaseOutcome) => void,
  ): void;
  /**
   * Takes back master `index`'s vote under `token`, whose answer had not come (not announced): true
   * once it was released there.
   */
  takeBack(index: number, token: string, lease: number): Promise<boolean>;
}

/** What a round that won the quorum hands to its handle. */
export interface RedLockGrant {
  /** One slot per master: its hold, or null. */
  handles: (LockHandle | null)[];
  /**
   * One slot per master: the token of a vote asked in the round whose answer had not come when the
   * round was decided, or null. A release is sent for it too (see releaseAll).
   */
  unanswered: (string | null)[];
  /** When the round's first command was sent (monotonicNow). */
  sentAt: number;
  lease: number;
  watched: boolean;
  /** How long one master may take to answer a release or an extension. */
  instanceTimeout: number;
  owner: string;
  label?: string;
}

/**
 * A RedLock acquisition: held on at least a quorum of the masters. Its validity is what a quorum of
 * them still holds: per master, from the send of the command that last set its lease (the grant, a
 * watchdog renewal, `extend()`) plus that lease, the quorum-th longest of these, minus the drift. A
 * renewal that lands on a quorum moves it forward; `signal` aborts when it runs out, or once fewer
 * than a quorum still hold it. RedLock has no single fencing token (each master counts on its own):
 * the tokens are per master.
 */
export class RedLockHandle implements GroupLockHandle, AsyncDisposable, ValidityEnd {
  /** Made when first asked for (see signal): most acquisitions are released without anyone reading it. */
  private controller?: AbortController;
  /** Why the lock was lost (see lose); undefined while it is not. */
  private lostWith?: LockLostError;
  private releasing?: Promise<ReleaseOutcome>;
  /** One slot per master: its hold, or null. A hold that lands after the grant fills its slot. */
  readonly handles: (LockHandle | null)[];
  /** See RedLockGrant.unanswered: emptied as their answers come, or by the release. */
  private readonly unanswered: (string | null)[];
  /**
   * Per master, the take-back the release sent for an unanswered vote: its token, and whether it released
   * that vote (see takeBackOf).
   */
  private readonly takenBack: ({ token: string; released: Promise<boolean> } | null)[];
  /**
   * Per master, on the monotonic clock: the earliest its hold can end, less the drift allowance of the
   * lease that set it (-Infinity: none). See until.
   */
  private readonly heldUntil: number[];
  private readonly lease: number;
  /**
   * What `extend()` with no lease renews by: the grant's lease, or (not watched) the last extension's,
   * as a simple lock's extend() does. Sent to every master explicitly: each master's hold would
   * otherwise renew by its own lease, which the validity would not know (it took the watchdog timeout).
   */
  private renewalLease: number;
  private readonly watched: boolean;
  private readonly instanceTimeout: number;
  private readonly grantedAt = monotonicNow();
  /** The owner every master's hold names. */
  readonly owner: string;
  private readonly label?: string;

  constructor(
    private readonly redLock: RedLockQuorum,
    grant: RedLockGrant,
  ) {
    this.handles = grant.handles;
    this.unanswered = grant.unanswered;
    this.takenBack = grant.unanswered.map(() => null);
    this.lease = grant.lease;
    this.renewalLease = grant.lease;
    this.watched = grant.watched;
    this.instanceTimeout = grant.instanceTimeout;
    this.owner = grant.owner;
    this.label = grant.label;
    this.heldUntil = grant.handles.map((h) => (h ? this.until(grant.sentAt, grant.lease) : -Infinity));
    grant.handles.forEach((handle, index) => handle && this.follow(index, handle));
    // A vote lost before it was followed (never expected: each was recorded just now) is found here,
    // in the next turn, after the grant was reported.
    if (grant.handles.some((h) => h?.isLost)) setImmediate(() => this.recount());
    else this.armExpiry();
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostWith) this.controller.abort(this.lostWith);
    }
    return this.controller.signal;
  }

  get fencingTokens(): (number | null)[] {
    return this.handles.map((h) => h?.fencingToken ?? null);
  }

  /** Milliseconds of guaranteed validity left, on the monotonic clock (0 when none, lost or released). */
  get validity(): number {
    return Math.max(0, this.left());
  }

  /**
   * When the validity ends, as a wall-clock timestamp (ms since epoch) worked out when read: now plus
   * what is left (in the past once it ran out). The deadline itself is kept on the monotonic clock, so
   * a step of the wall clock moves this by the step and changes nothing else.
   */
  get validUntil(): number {
    return Date.now() + this.left();
  }

  /** Until the end of the validity (negative once past; 0 once lost or released). */
  private left(): number {
    return this.lostWith || this.releasing ? 0 : this.deadline() - monotonicNow();
  }

  /**
   * Releases on every master: answers once a quorum confirmed, else waits for the masters that can
   * answer (each at most instanceTimeout), never for one that is down (its release goes on in the
   * background until its lease ends). `released` when a quorum confirmed, `pending` when that may still
   * happen, else `expired`.
   */
  release(): Promise<ReleaseOutcome> {
    this.releasing ??= this.releaseAll().then((outcome) => {
      this.redLock.emit('released', () => ({
        ...this.eventBase(),
        heldMs: monotonicNow() - this.grantedAt,
        outcome,
      }));
      return outcome;
    });
    return this.releasing;
  }

  /**
   * @internal Gives back a grant nobody will hold (its caller aborted while the round ran): released as
   * by `release()`, with no event (it was never reported acquired).
   */
  giveBack(): Promise<ReleaseOutcome> {
    this.releasing ??= this.releaseAll();
    return this.releasing;
  }

  /** Extends on every master that still holds it; throws LockLostError unless a quorum confirms. */
  async extend(leaseTime?: number): Promise<void> {
    // Checked here, before any master is asked: a value every master refused would read as a lost quorum.
    leaseTime = checkDuration(this.redLock.name, 'leaseTime', leaseTime, LEASE_RULE);
    this.redLock.checkLease(leaseTime);
    const started = monotonicNow();
    const lease = leaseTime ?? this.renewalLease;
    const results = await Promise.all(
      this.handles.map((h, i) =>
        h && this.redLock.usable(i)
          ? this.redLock.boundedOn(i, h.extend(lease), 'redlock extend', this.instanceTimeout).then(
              () => true,
              () => false,
            )
          : false,
      ),
    );
    if (results.filter(Boolean).length < this.redLock.quorum) {
      this.lose('not-owner');
      throw new LockLostError(this.redLock.name, this.owner, 'not-owner');
    }
    if (!this.watched) this.renewalLease = lease;
    // Each master that confirmed holds it for `lease` from the send at least; the others as before.
    results.forEach((confirmed, i) => confirmed && (this.heldUntil[i] = this.until(started, lease)));
    this.armExpiry();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /**
   * Takes a hold that answered after the round was decided; false when this handle is done with.
   * `sentAt`: when the round sent its command (monotonicNow).
   */
  adopt(index: number, handle: LockHandle, sentAt: number): boolean {
    if (!this.canAdopt(index)) return false;
    this.unanswered[index] = null;
    this.handles[index] = handle;
    this.heldUntil[index] = this.until(sentAt, this.lease);
    this.follow(index, handle);
    this.armExpiry();
    return true;
  }

  /** Whether a hold of master `index` that answered after the round was decided would be taken. */
  canAdopt(index: number): boolean {
    return !this.releasing && !this.lostWith && !this.handles[index];
  }

  /**
   * The take-back the release sent for master `index`'s unanswered vote under `token` (undefined: none):
   * whether it released that vote. Sent after the grant on the same connection, it runs after it, unless
   * the grant had to go again after NOSCRIPT: then it released nothing, and the late grant is still to
   * be undone. Its answer is awaited, never guessed from the order the replies are handled in: two
   * replies read at once reach their handlers after different numbers of promise steps.
   */
  takeBackOf(index: number, token: string): Promise<boolean> | undefined {
    const takenBack = this.takenBack[index];
    return takenBack?.token === token ? takenBack.released : undefined;
  }

  /** @internal What every event of this acquisition names. */
  eventBase(): { name: string; kind: 'redlock'; owner: string; label?: string } {
    return { name: this.redLock.name, kind: 'redlock', owner: this.owner, label: this.label };
  }

  /**
   * The end of the validity on the monotonic clock: the quorum-th latest end among the masters that
   * still hold it, each less its lease's drift allowance (-Infinity when fewer than a quorum hold it).
   */
  private deadline(): number {
    // The latest end that a quorum of the holds reach: no array sorted at every grant and renewal.
    const { handles, heldUntil } = this;
    let deadline = -Infinity;
    for (let i = 0; i < handles.length; i++) {
      const end = heldUntil[i];
      if (!handles[i] || handles[i]!.isLost || end <= deadline) continue;
      let reaching = 0;
      for (let j = 0; j < handles.length; j++) if (handles[j] && !handles[j]!.isLost && heldUntil[j] >= end) reaching++;
      if (reaching >= this.redLock.quorum) deadline = end;
    }
    return deadline;
  }

  /**
   * The end of a hold whose lease `lease` was set by a command sent at `sentAt`, less that lease's drift
   * allowance: an extension to a longer lease has a larger one than the grant's.
   */
  private until(sentAt: number, lease: number): number {
    return sentAt + lease - this.redLock.drift(lease);
  }

  /**
   * Sends the release to every master holding a vote, and to every master whose vote had not answered
   * when the round was decided (it may be a grant still on its way: the release follows it on the same
   * connection), and answers as soon as the outcome is known: `released` once a quorum confirmed (the
   * other masters' releases finish in the background, each bounded by the instance timeout), else once
   * every master that can answer did.
   */
  private releaseAll(): Promise<ReleaseOutcome> {
    validityClock.unwatch(this);
    const { quorum } = this.redLock;
    return new Promise((resolve) => {
      let released = 0;
      let pending = 0;
      let unanswered = 0;
      const decide = (): void => {
        if (released >= quorum) resolve('released');
        else if (unanswered === 0) resolve(released + pending >= quorum ? 'pending' : 'expired');
      };
      const count = (outcome: ReleaseOutcome): void => {
        unanswered--;
        if (outcome === 'released' || outcome === 'decremented') released++;
        else if (outcome === 'pending') pending++;
        decide();
      };
      // Every master's release is written before any is followed: the last master's goes as early as
      // the first's.
      const sent = this.handles.map((h, i) => (h ? h.release() : this.takeBack(i)));
      sent.forEach((release, i) => {
        if (!release) return;
        const held = this.handles[i] !== null;
        if (held && !this.redLock.usable(i)) {
          // Down: it goes on by itself (sent again until it lands or the lease is over).
          release.catch(() => undefined);
          return void pending++;
        }
        unanswered++;
        // No answer in time: a release goes on in the background, a take-back counts as nothing taken.
        this.redLock.followRelease(i, release, this.instanceTimeout, (outcome) =>
          count(outcome ?? (held ? 'pending' : 'expired')),
        );
      });
      decide();
    });
  }

  /**
   * Takes back master `index`'s vote whose answer had not come when the round was decided (see
   * takeBackOf): `released` when it was held and is released now, else `expired`; undefined when there is
   * none, or its master is down.
   */
  private takeBack(index: number): Promise<ReleaseOutcome> | undefined {
    const token = this.unanswered[index];
    if (token === null || !this.redLock.usable(index)) return undefined;
    this.unanswered[index] = null;
    // Nothing taken back: the grant has not run yet (a first EVALSHA refused NOSCRIPT goes again as EVAL,
    // after this release), or was refused. A late grant is then undone on its own (see takeBackOf).
    const released = this.redLock.takeBack(index, token, this.lease);
    this.takenBack[index] = { token, released };
    return released.then((yes) => (yes ? 'released' : 'expired'));
  }

  /**
   * Master `index`'s hold is a vote of this RedLock: its renewals move the validity, and its loss (not
   * reported alone) is counted against the quorum at once.
   */
  private follow(index: number, handle: LockHandle): void {
    handle.asVote(
      (sentAt, leaseMs) => {
        this.heldUntil[index] = this.until(sentAt, leaseMs);
        this.armExpiry();
      },
      (error) => this.checkQuorum(error),
    );
  }

  /** After a vote lost before it was followed: the quorum counted again, the end of the validity timed. */
  private recount(): void {
    const lost = this.handles.find((h) => h?.isLost);
    if (lost) this.checkQuorum(lost.signal.reason);
    else this.armExpiry();
  }

  /** Times the end of the validity (again when renewals move it; see ValidityClock). */
  private armExpiry(): void {
    if (this.releasing || this.lostWith) return validityClock.unwatch(this);
    const deadline = this.deadline();
    if (deadline - monotonicNow() <= 0) return this.lose(this.watched ? 'unreachable' : 'lease-expired');
    validityClock.watch(this, deadline);
  }

  /** @internal The end the clock was told came: the deadline is checked again (a renewal may have moved it). */
  endCame(): void {
    this.armExpiry();
  }

  private checkQuorum(reason: unknown): void {
    const alive = this.handles.filter((h) => h && !h.isLost).length;
    if (alive < this.redLock.quorum) this.lose(reason instanceof LockLostError ? reason.reason : 'not-owner');
    else this.armExpiry(); // the validity may now rest on masters whose holds end sooner
  }

  /** Reported once: the holder's signal aborts and the first master's client logs and emits it. */
  private lose(reason: LockLostReason): void {
    validityClock.unwatch(this);
    if (this.lostWith || this.releasing) return;
    const error = new LockLostError(this.redLock.name, this.owner, reason);
    this.lostWith = error;
    this.controller?.abort(error);
    this.redLock.reportLoss(error);
  }
}
