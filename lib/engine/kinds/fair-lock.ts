import { monotonicNow } from '../util/clock';
import { randomUUID } from 'node:crypto';
import type { Attempt } from '../waiting/acquire-loop';
import type { LockKindName } from '../client/lock-events';
import type { EngineContext } from '../client/engine-context';
import { HashLock } from './hash-lock';
import {
  attemptOutcome,
  type AttemptRequest,
  type Grant,
  type RawRelease,
  type WaitBehaviour,
} from '../lock/lock-base';
import type { LockCall } from '../lock/lock-call';
import { releaseCallOf } from '../holds/hold-id-calls';
import type { HandOver } from '../turns/process-turns';
import { checkDuration, TIMEOUT_RULE } from '../util/validation';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import { connectionMark } from '../redis/connection-mark';
import type { LeaseFrom } from '../util/server-clock';
import { handOverFirstLease } from '../holds/hand-over-lease';
import { FairWait, parseHandOver, type HandOverMessage } from './fair-hand-over';
import { isGivenUpWaitOf, rememberGivenUpWait } from '../waiting/given-up-waits';
import { FAIR_ABANDON, FAIR_ACCEPT, FAIR_FORCE_UNLOCK, FAIR_LOCK, FAIR_UNLOCK } from '../scripts/catalog';

export interface FairLockOptions {
  /**
   * A waiter that has not refreshed its place for this long counts as dead and is dropped from the
   * queue. Waiters refresh every third of it. Default 5000 ms.
   */
  staleWaiterTimeout?: number;
  /**
   * Lease of a lock just handed to the next waiter, until that holder renews it (at half this lease,
   * unless released first: the hand-over's message is the grant) or accepts it (one round trip before
   * its code runs, where the message alone cannot vouch for the grant; see FairLock.attempt). A
   * hand-off not taken in time lapses and the next waiter gets the lock; the late waiter is refused and
   * queues again. So this only bounds what a waiter that cannot take it (its process frozen, or cut off
   * from Redis while its subscriber still listens) costs everyone behind it. Default 1000 ms.
   */
  acceptanceLease?: number;
}

export const FAIR_LOCK_DEFAULTS = { staleWaiterTimeout: 5_000, acceptanceLease: 1_000 } as const;

/** fair-abandon-7.lua's word for "the hold handed over to the wait, whatever its id" (no hold id is '*'). */
const ANY_HANDED_HOLD = '*';

/**
 * The wait each `lock()` or `tryLock()` call is in, for its attempts: each wait has a waiter id of its
 * own (see waitBehaviour), never its owner's, since any number of waits may share an owner, and keeps
 * what a grant in the message needs (the hold ids it registered, its server clock anchors; see FairWait).
 */
const waitsOfCalls = new WeakMap<LockCall, FairWait>();

/**
 * Redisson's RFairLock, improved: waiters queue in FIFO order (a list plus a zset of deadlines in
 * Redis server time); the releasing script hands the lock straight to the next live waiter and
 * tells only that waiter, so a hand-off costs one message and no race. The hand-over records the hold
 * itself, under the id the wait registered, and the message is the grant: the new holder's code runs
 * on it with no further round trip, believing only the short acceptance lease (counted from a server
 * clock anchor of its wait) until its own renewal, at half of it, lands; where the message alone
 * cannot vouch for the grant, the waiter accepts it first (see attempt()). Each wait has its own place
 * and id (see lua/include/fair-queue.lua): two waits of one owner, in one process or two, never take
 * each other's. Re-entrant like the reentrant lock (an owner that holds it re-enters, whichever wait
 * asks), and mutually exclusive with it on the same name. Like it, each hold has an id of its own (the
 * attempt's, also when it accepts a hand-off; see lua/include/hold-ids.lua): a release names the hold
 * it ends and a repeated command is recognised by its id, never by a count this client remembers.
 * @example
 * await locks.getFairLock('ticket-counter').withLock(() => serveNext());
 */
export class FairLock extends HashLock {
  readonly kind: LockKindName = 'fair';
  // Strict FIFO: every release hands the lock to the queue head, whichever process it is in, so
  // processes take no turns (LockBase's takesTurns stays false).
  private readonly staleWaiterTimeout: number;
  private readonly acceptanceLease: number;
  /** Each client listens on its own channel per lock; a hand-off message names the wait it is for. */
  private readonly clientChannel: string;

  constructor(engine: EngineContext, name: string, options: FairLockOptions = {}) {
    super(engine, name);
    this.staleWaiterTimeout =
      checkDuration(name, 'staleWaiterTimeout', options.staleWaiterTimeout, TIMEOUT_RULE) ??
      FAIR_LOCK_DEFAULTS.staleWaiterTimeout;
    this.acceptanceLease =
      checkDuration(name, 'acceptanceLease', options.acceptanceLease, TIMEOUT_RULE) ??
      FAIR_LOCK_DEFAULTS.acceptanceLease;
    this.clientChannel = `${this.keys.channel}:${engine.clientId}`;
  }

  /** A waiter id: the client's own id (its channel) and a nonce, `<client id>:<nonce>`. */
  private newWaiterId(): string {
    return `${this.engine.clientId}:${randomUUID()}`;
  }

  /**
   * Made at the start of each lock() or tryLock() call: its waiter id, which its attempts queue under.
   * Asked again when the call waits anew (its grant lost in a failover), it keeps that id, and so the
   * wait's place in the queue of the master serving the lock now (under a new id the wait would queue
   * behind its own old place until that went stale). What the wait knew besides (the hold ids its
   * attempts registered, its clock anchors) was the old master's, and is not kept: a hand-over only
   * the old master made names none of the hold ids registered from now on, so its message is never
   * believed (see attempt).
   */
  protected override waitBehaviour(_owner: string, lockCall: LockCall): WaitBehaviour {
    const waiterId = waitsOfCalls.get(lockCall)?.waiterId ?? this.newWaiterId();
    waitsOfCalls.set(lockCall, new FairWait(waiterId));
    return {
      channel: this.clientChannel,
      waiterId,
      // Retrying refreshes our deadline, and covers a message that got lost.
      maxSleep: Math.max(1, Math.floor(this.staleWaiterTimeout / 3)),
      // A hand-off to a wait of ours that has ended (this channel is our client's, so the wait was ours):
      // passed on now, not after the acceptance lease. Only what was handed to that wait is touched.
      onUnclaimed: (endedWaiterId: string, payload: string) => this.unclaimed(endedWaiterId, payload),
      // No process-wide re-check and no pass-on of plain wake-ups: the queue and maxSleep cover both.
    };
  }

  protected async attempt(request: AttemptRequest): Promise<Attempt<Grant>> {
    const { holder, leaseMs, payload, waiting, holdId } = request;
    // Every attempt is made for its lock() or tryLock() call, whose wait waitBehaviour made.
    const wait = waitsOfCalls.get(request.lockCall) ?? new FairWait(this.newWaiterId());
    const told = payload === undefined ? undefined : parseHandOver(payload.text);
    if (told?.kind === 'offer') return this.accept(holder, leaseMs, wait.waiterId, holdId, told.token);
    // A grant naming a hold id none of our attempts registered is not for this wait: ask Redis.
    if (told?.kind === 'grant' && wait.registered(told.holdId)) {
      const firstLease = this.firstLeaseOf(wait, told, leaseMs, payload?.socketSince);
      if (firstLease) {
        const handedOver = { holdId: told.holdId, firstLease };
        return { acquired: true, value: { fencingToken: told.token, reentered: false, handedOver } };
      }
      // The message alone cannot vouch for it: accepted on the current master, by the hold's id.
      return this.accept(holder, leaseMs, wait.waiterId, told.holdId, told.token, true);
    }
    const { staleWaiterTimeout, acceptanceLease } = this;
    const { redis, publishCommand: publish } = this.engine;
    // A single attempt (no `waiting`) never queues. Nor does a wait's first attempt before this client
    // listens on its channel: queued, a hand-over to it could find nobody listening and pass it by for
    // a wait queued after it (the acquire loop subscribes and tries again, then queuing). A queued
    // attempt registers its id, and its reply's server time is an anchor for a grant in the message.
    const queues = waiting !== undefined && (waiting.refusedBefore || this.engine.waiters.isLive(this.clientChannel));
    if (queues) wait.registering(holdId);
    const sentAt = monotonicNow();
    const [status, value, more] = await FAIR_LOCK.run(redis, this.keys, {
      idleKeyTtl: this.engine.idleKeyTtl,
      leaseMs,
      owner: holder,
      staleWaiterTimeout,
      acceptanceLease,
      publish,
      holdId,
      waiterId: wait.waiterId,
      mode: queues ? 'wait' : 'once',
    });
    if (status === 'refused' && typeof more === 'number') {
      // The connection the reply just came on (read in the same turn of the event loop as the reply, so
      // no reconnect came between): its server's clock is the one `more` was read from. Whether the
      // command waited to be sent (connecting) or was sent again on a new connection does not matter:
      // the script ran after `sentAt` whichever server ran it.
      const connection = connectionMark(redis, this.keys.lock);
      if (connection) wait.anchored({ sentAt, serverMs: more, connection });
    }
    if (status === 'granted' && typeof more === 'string') {
      // The hold handed over to this wait, its lease now set by this attempt.
      return { acquired: true, value: { fencingToken: value, reentered: false, handedOver: { holdId: more } } };
    }
    return attemptOutcome(status, value);
  }

  /**
   * The first lease to believe for `grant`, told in a message; undefined when the message alone cannot
   * vouch for it, and the grant is accepted instead (one round trip, on the connection of this client):
   * - the hold's own lease `leaseMs` is shorter than the acceptance lease the hand-over gave it: Redis
   *   must not keep the lock longer than the holder asked for;
   * - replica sync would WAIT for the grant: WAIT vouches for the writes of the connection it runs on,
   *   and the hand-over was another client's (its acceptance, a write of ours after it, is waited for);
   * - no anchor of this wait can place the grant on this process's clock: none came on the connection
   *   still open now (it reconnected since: the master may have changed, and the message may be from
   *   an old one whose hand-over the new master never had), or their server time disagrees with ours;
   * - the lease is over or half gone already (a late message): its renewal would be due at once, and
   *   an acceptance, the same one command, also says whether the hold is still there.
   */
  private firstLeaseOf(
    wait: FairWait,
    grant: Extract<HandOverMessage, { kind: 'grant' }>,
    leaseMs: number,
    heardSince: number | undefined,
  ): LeaseFrom | undefined {
    const { redis, replicaSync, registry } = this.engine;
    const key = this.keys.lock;
    if (leaseMs < this.acceptanceLease || replicaSync.waitsAfterGrant(key)) return undefined;
    const { acceptanceLease } = this;
    return handOverFirstLease(
      wait.anchors,
      grant.serverMs,
      acceptanceLease,
      registry.driftFactor,
      redis,
      key,
      heardSince,
    );
  }

  /**
   * The release handed us the lock: accepted before the caller runs, on the master this client talks
   * to now (after a failover the message may come from a master whose hand-off the promoted replica
   * never received, and a holder that started on the message alone would overlap the one the new master
   * grants). An offer is accepted under this attempt's own id `holdId`; a grant (`handedOver`) under the
   * id the hand-over recorded it under, which `holdId` then is. Idempotent, so sent again through a
   * failover for as long as the hand-off can still be ours.
   */
  private async accept(
    holder: string,
    leaseMs: number,
    waiterId: string,
    holdId: string,
    token: number,
    handedOver = false,
  ): Promise<Attempt<Grant>> {
    const { redis, operationTimeout, idleKeyTtl } = this.engine;
    const accept = () => FAIR_ACCEPT.run(redis, this.keys, { leaseMs, owner: holder, waiterId, holdId, idleKeyTtl });
    const accepted = await retryWhileUnreachable(accept, {
      redis,
      operationTimeout,
      until: monotonicNow() + this.acceptanceLease,
      key: this.name,
      name: 'accept hand-off',
    });
    // Not ours (stale or forged, or its lease ran out): keep waiting, trying again at once.
    if (!accepted) return { acquired: false, ttl: 0 };
    const grant: Grant = { fencingToken: token, reentered: false };
    if (handedOver) grant.handedOver = { holdId };
    return { acquired: true, value: grant };
  }

  /** Releases hold `holdId`; without one (an unlock by owner of a hold taken elsewhere), any hold of `owner`. */
  protected releaseOnce(
    owner: string,
    leaseMs: number,
    holdId?: string,
    _handOver?: HandOver,
    callId?: string,
  ): Promise<RawRelease> {
    return FAIR_UNLOCK.run(this.engine.redis, this.keys, {
      idleKeyTtl: this.engine.idleKeyTtl,
      owner,
      ...releaseCallOf(holdId, this.engine.newHoldId, callId),
      leaseMs,
      acceptanceLease: this.acceptanceLease,
      publish: this.engine.publishCommand,
    });
  }

  /**
   * A wait that ended without the lock leaves the queue; if the lock was handed to it meanwhile, it is
   * passed on to the next waiter (a single attempt never queued: nothing to do).
   */
  protected override async abandonWait(owner: string, waiterId: string | undefined, waited: boolean): Promise<void> {
    if (!waited || waiterId === undefined) return;
    rememberGivenUpWait(this.engine, waiterId); // a hand-off to it from now on is passed on (see unclaimed)
    // The wait took no hold: one a hand-over recorded for it, whatever its id, is released.
    await this.bounded(this.leave(waiterId, owner, ANY_HANDED_HOLD), 'abandon wait');
  }

  /**
   * A hand-off message for a wait no longer waiting here: what was handed to it is passed on, unless the
   * wait took it (an attempt found the hold handed over, or claimed it: a hold this client has is
   * released by its holder, never here), or the wait was not this client's (a client sharing its
   * client id waits for it, and its holder believes the message: see given-up-waits.ts).
   */
  private unclaimed(waiterId: string, payload: string): void {
    if (!isGivenUpWaitOf(this.engine, waiterId)) return;
    const told = parseHandOver(payload);
    if (told?.kind === 'grant' && this.engine.registry.hasHold(this.keys.lock, told.holdId)) return;
    void this.leave(waiterId, '', told?.kind === 'grant' ? told.holdId : '').catch(() => undefined);
  }

  /**
   * Takes the wait `waiterId` (of `owner`; '' when not known) out of the queue, passing on a hand-off
   * made to it: an offer, and the hold a hand-over recorded for it if `handedHold` names it (its id, or
   * ANY_HANDED_HOLD; '' none). Through an outage too (it is idempotent): a place left in the queue would
   * be handed the lock by the next release, and cost everyone behind it an acceptance lease.
   */
  private leave(waiterId: string, owner: string, handedHold: string): Promise<boolean> {
    const { redis, operationTimeout, publishCommand, idleKeyTtl } = this.engine;
    const args = {
      waiterId,
      owner,
      holdId: handedHold,
      acceptanceLease: this.acceptanceLease,
      publish: publishCommand,
      idleKeyTtl,
    };
    const left = retryWhileUnreachable(() => FAIR_ABANDON.run(redis, this.keys, args), {
      redis,
      operationTimeout,
      until: monotonicNow() + this.staleWaiterTimeout,
      key: this.name,
      name: 'abandon wait',
    });
    // A caller stops waiting for it after one operation timeout (see abandonWait); it goes on meanwhile.
    void left.catch(() => undefined);
    return left;
  }

  /** Deletes the lock whoever holds it and hands it to the next waiter. True when it was locked. */
  override async forceUnlock(): Promise<boolean> {
    const { redis, publishCommand } = this.engine;
    const force = FAIR_FORCE_UNLOCK.run(redis, this.keys, {
      idleKeyTtl: this.engine.idleKeyTtl,
      acceptanceLease: this.acceptanceLease,
      publish: publishCommand,
      callId: randomUUID(),
    });
    return this.bounded(force, 'forceUnlock');
  }
}
