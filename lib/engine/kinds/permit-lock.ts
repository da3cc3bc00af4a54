import { randomUUID } from 'node:crypto';
import type { Attempt } from '../waiting/acquire-loop';
import { monotonicNow } from '../util/clock';
import { handOverFirstLease, type WaitAnchor } from '../holds/hand-over-lease';
import type { HeardPayload } from '../waiting/wait-ticket';
import { connectionMark } from '../redis/connection-mark';
import type { EngineContext } from '../client/engine-context';
import { LockOptionsError } from '../errors';
import type { RenewalKind } from '../holds/held-lock';
import { LockBase, type AttemptRequest, type Grant, type RawRelease, type WaitBehaviour } from '../lock/lock-base';
import type { LockKindName } from '../client/lock-events';
import { SEMAPHORE_ACQUIRE, SEMAPHORE_CLAIM, type PermitAttemptMode } from '../scripts/catalog';
import { parsePermitHandOver } from './permit-hand-over';
import { isGivenUpWaitOf, rememberGivenUpWait } from '../waiting/given-up-waits';
import type { ReleaseReplayer } from '../holds/recent-releases';
import type { PermitKeys } from './permit-keys';
import type { PermitReleases } from './permit-releases';

/** semaphore-acquire-7.lua's refusal of an ask above the current limit (see PermitLock.attempt). */
const NEVER_GRANTABLE = -2;

/** How the semaphore's queue and hand-overs are timed (see SemaphoreOptions). */
export interface PermitTimings {
  acceptanceLease: number;
  staleWaiterTimeout: number;
}

/**
 * One acquisition of `permits` permits, seen as a lock so that it shares LockBase's acquire loop,
 * handles, watchdog renewals, and releases retried through an outage. Each acquisition is a hold of
 * its own: the member '<permits>:<owner>:<uuid>' of the holds set, the same for every attempt of one
 * wait. A refused waiter queues that member (FIFO, with a liveness deadline it refreshes while it
 * waits); a release hands the permits straight to the longest-waiting acquisitions that fit, records
 * their holds with a short acceptance lease, and tells each on its client's channel (see
 * lua/include/semaphore-queue.lua). The message alone is the grant: the holder believes only that
 * acceptance lease, counted from its last refusal's server time (see leaseFromAnchor), until its own
 * renewal at half of it lands (see HeldLock.watchFirstLease). Where the message cannot vouch for the
 * hold (another server may have sent it, replicas must acknowledge the grant, or it came too late),
 * the waiter asks Redis instead: its attempt finds its member held and takes it with its own lease.
 */
export class PermitLock extends LockBase {
  override readonly kind: LockKindName = 'semaphore';
  protected readonly renewal: RenewalKind = 'permit';
  protected override readonly defaultLeaseTime: number | undefined;
  /** This wait's hold member (see waitBehaviour). */
  private member?: string;
  /** The latest refusal of this wait that read Redis's clock (see handOverFirstLease). */
  private anchor?: WaitAnchor;
  /** The acquisition waits anew after a failover, under its first member (see waitBehaviour). */
  private waitedAnew = false;

  constructor(
    engine: EngineContext,
    name: string,
    private readonly semaphore: PermitKeys,
    private readonly permits: number,
    private readonly limit: number,
    defaultLeaseTime: number | undefined,
    private readonly timings: PermitTimings,
    private readonly permitReleases: PermitReleases,
  ) {
    // `lock` is the holds, under which the registry and the watchdog know each hold; the hand-over
    // and the fair queue of the other kinds are not used.
    const { holds, fence, channel, waiting } = semaphore;
    super(engine, name, () => ({
      lock: holds,
      fence,
      channel,
      waiting,
      next: holds,
      queue: holds,
      deadlines: holds,
      waiterHolds: holds,
      forced: holds,
      grants: holds,
    }));
    this.defaultLeaseTime = defaultLeaseTime;
  }

  /** The semaphore's, not this acquisition: kept for a few seconds after each release (see PermitReleases). */
  protected override get releaseReplayer(): ReleaseReplayer {
    return this.permitReleases;
  }

  /** The holds, the fencing counter, then the run-time limit (see renew-many-n.lua). */
  protected override get renewalKeys(): readonly string[] {
    return (this.renewed ??= [this.semaphore.holds, this.semaphore.fence, this.semaphore.limit]);
  }

  private renewed?: readonly string[];

  /** Every attempt of one wait sends the same member, and takes the permits it finds held by it. */
  protected override readonly retryAdoptsHold = true;

  /** Every attempt of one wait sends the same member: a hand-over to it names it. */
  protected override holderFor(owner: string): string {
    return (this.member ??= this.newMember(owner));
  }

  private newMember(owner: string): string {
    return `${this.permits}:${owner}:${randomUUID()}`;
  }

  /** This client's channel for this semaphore: hand-over messages name the member they are for. */
  private get clientChannel(): string {
    return (this.ownClientChannel ??= `${this.semaphore.channel}:${this.engine.clientId}`);
  }

  private ownClientChannel?: string;

  /**
   * Made at the start of each wait (one lock() / tryLock(): a PermitLock is made per acquisition, see
   * Semaphore.prepare): its member, which hand-overs address. Asked again when the acquisition waits
   * anew (its grant lost in a failover), it keeps that member, and so the wait's place in the queue of
   * the master serving the semaphore now (a new member would queue behind the old place, which would
   * be handed the permits first). A hand-over message names only the member, so from then on one the
   * old master alone made cannot be told from the new master's: the wait claims every hand-over on the
   * master instead of believing its message (see handedOver).
   */
  protected override waitBehaviour(owner: string): WaitBehaviour {
    if (this.member === undefined) this.member = this.newMember(owner);
    else this.waitedAnew = true;
    this.anchor = undefined;
    return {
      channel: this.clientChannel,
      waiterId: this.member,
      // Each retry refreshes the queue's liveness deadline, and covers a lost message.
      maxSleep: Math.max(1, Math.floor(this.timings.staleWaiterTimeout / 3)),
      // A hand-over to a wait of this client that ended: given back now, not after the acceptance lease.
      onUnclaimed: (member: string) => this.giveBackUnclaimed(member),
    };
  }

  protected async attempt({ holder, leaseMs, payload, waiting, holdId }: AttemptRequest): Promise<Attempt<Grant>> {
    if (payload !== undefined) {
      const handed = this.handedOver(holder, payload, holdId, leaseMs);
      if (handed) return { acquired: true, value: handed };
      // Not usable as it is: the member is claimed with this wait's own lease (set exactly: the
      // hand-over's acceptance lease may be longer), or, no longer held, attempted anew below.
      const claimed = await this.claim(holder, leaseMs);
      if (claimed) return { acquired: true, value: claimed };
    }
    const sentAt = monotonicNow();
    const reply = await this.acquireScript(holder, leaseMs, this.modeOf(waiting));
    if (reply[0] === 'granted') return { acquired: true, value: { fencingToken: reply[1], reentered: false, holder } };
    const [, ms, available, serverMs] = reply;
    if (ms === NEVER_GRANTABLE) {
      throw new LockOptionsError(
        `Cannot take ${this.permits} permit(s) of semaphore "${this.name}": its limit is ${available} now ` +
          '(lowered by setPermits), so no release can ever make room. Ask for fewer, or raise the limit.',
        this.name,
        { option: 'permits', value: this.permits },
      );
    }
    // A hand-over to this member comes after this refusal, on the same server unless the connection changed.
    const connection = serverMs === undefined ? undefined : connectionMark(this.engine.redis, this.semaphore.holds);
    if (connection) this.anchor = { sentAt, serverMs: serverMs!, connection };
    return { acquired: false, ttl: ms };
  }

  /**
   * How a refused attempt queues. Not before this client listens on its channel: a hand-over to it
   * would find nobody listening and pass it by. (Not subscribed yet, the acquire loop subscribes and
   * tries again; subscribed already, a hot semaphore's, the first attempt queues.)
   */
  private modeOf(waiting: AttemptRequest['waiting']): PermitAttemptMode {
    if (!waiting) return 'once';
    return waiting.refusedBefore ? 'queued' : this.engine.waiters.isLive(this.clientChannel) ? 'wait' : 'once';
  }

  /**
   * The grant a hand-over message makes, believed for its acceptance lease as counted from this wait's
   * last refusal; undefined when the message cannot vouch for the hold: no refusal of this connection
   * to count from (it reconnected since: maybe to another server), replicas must acknowledge grants
   * (which only a call of ours can wait for), less than half of the acceptance lease would be left, or
   * the hold's own lease `leaseMs` is shorter than the acceptance lease, or the acquisition waits anew
   * after a failover (see waitBehaviour).
   */
  private handedOver(holder: string, payload: HeardPayload, holdId: string, leaseMs: number): Grant | undefined {
    const message = parsePermitHandOver(payload.text);
    const { redis, replicaSync, registry } = this.engine;
    const key = this.semaphore.holds;
    const { acceptanceLease } = this.timings;
    // A lease of its own shorter than the acceptance lease: Redis must not keep the permits longer
    // than the holder asked for, which only a call of ours can set.
    if (!message || this.waitedAnew || leaseMs < acceptanceLease || replicaSync.waitsAfterGrant(key)) return undefined;
    const firstLease = handOverFirstLease(
      [this.anchor],
      message.grantedAtMs,
      acceptanceLease,
      registry.driftFactor,
      redis,
      key,
      payload.socketSince,
    );
    if (!firstLease) return undefined;
    return { fencingToken: message.fencingToken, reentered: false, holder, handedOver: { holdId, firstLease } };
  }

  /**
   * A hand-over message for a wait no longer waiting here. If its acquisition holds (its own attempt
   * took the member first), or the wait was not this client's (a client sharing its client id waits
   * for it: see given-up-waits.ts), nothing; else its permits go back and on at once.
   */
  private giveBackUnclaimed(member: string): void {
    if (this.engine.registry.get(this.semaphore.holds, member)) return;
    if (!isGivenUpWaitOf(this.engine, member)) return;
    void this.leave(member);
  }

  /** A wait that ended without its permits leaves the queue, giving back any handed to it meanwhile. */
  protected override async abandonWait(_owner: string, _waiterId: string | undefined, waited: boolean): Promise<void> {
    const member = this.member;
    if (waited && member !== undefined && !this.engine.registry.get(this.semaphore.holds, member)) {
      rememberGivenUpWait(this.engine, member); // a hand-over to it from now on is given back (see giveBackUnclaimed)
      await this.leave(member);
    }
  }

  /** Best effort, bounded: a place or a hand-over left behind costs others its deadline or acceptance lease. */
  private leave(member: string): Promise<void> {
    return this.bounded(this.permitReleases.send(member, this.engine.clientId), 'leave wait').then(
      () => undefined,
      () => undefined,
    );
  }

  /** See PermitReleases.send. */
  protected releaseOnce(holder: string): Promise<RawRelease> {
    return this.permitReleases.send(holder, '');
  }

  /**
   * The unanswered attempt's member holds permits (its lease not over): claimed, its lease made
   * `leaseMs` from now, since the caller believes that lease from when the attempt was sent. The
   * hold may be a hand-over's, recorded with the acceptance lease only, or one whose lease ended that
   * no script reclaimed yet (its score is in the past, reclaimed first): the claim tells, and sets the
   * lease, in one call.
   */
  protected grantOfUnknownAttempt(holder: string, _holdId: string, leaseMs: number): Promise<Grant | undefined> {
    return this.claim(holder, leaseMs);
  }

  /**
   * `holder`'s member if it holds permits (its lease not over), its lease set to `leaseMs` from now,
   * with a token of its own (the counter as it is may be another hold's, granted since); undefined
   * when it holds none. Runs on a full Redis, as a renewal does (see semaphore-claim-5.lua).
   */
  private async claim(holder: string, leaseMs: number): Promise<Grant | undefined> {
    const { redis, clientId, idleKeyTtl } = this.engine;
    const reply = await SEMAPHORE_CLAIM.run(redis, this.semaphore, { member: holder, leaseMs, clientId, idleKeyTtl });
    if (reply[0] !== 'granted') return undefined;
    return { fencingToken: reply[1], reentered: false, holder };
  }

  /** semaphore-acquire-7.lua for `holder`'s member: an attempt, queued as `mode` says if refused. */
  private acquireScript(holder: string, leaseMs: number, mode: PermitAttemptMode) {
    const { redis, clientId, publishCommand, idleKeyTtl } = this.engine;
    return SEMAPHORE_ACQUIRE.run(redis, this.semaphore, {
      member: holder,
      permits: this.permits,
      leaseMs,
      configuredLimit: this.limit,
      publish: publishCommand,
      clientId,
      mode,
      idleKeyTtl,
      acceptanceLease: this.timings.acceptanceLease,
      staleWaiterTimeout: this.timings.staleWaiterTimeout,
    });
  }
}
