import { monotonicNow } from '../util/clock';
import { AsyncLocalStorage } from 'node:async_hooks';
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
import type { LockHandle } from '../holds/lock-handle';
import type { AcquireOptions } from '../lock/acquire-options';
import { claimedGrant, releaseCallOf } from '../holds/hold-id-calls';
import type { HandOver } from '../turns/process-turns';
import { checkDuration, TIMEOUT_RULE } from '../util/validation';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import {
  CLAIM_ATTEMPT,
  FAIR_ABANDON,
  FAIR_ACCEPT,
  FAIR_FORCE_UNLOCK,
  FAIR_LOCK,
  FAIR_UNLOCK,
} from '../scripts/catalog';

export interface FairLockOptions {
  /**
   * A waiter that has not refreshed its place for this long counts as dead and is dropped from the
   * queue. Waiters refresh every third of it. Default 5000 ms.
   */
  staleWaiterTimeout?: number;
  /**
   * Lease of a lock just handed to the next waiter, until its acceptance (one round trip, sent as
   * it wakes and before its code runs) applies its own lease. A hand-off not accepted in time lapses
   * and the next waiter gets the lock; the late waiter's acceptance is refused and it queues again.
   * So this only bounds what a waiter that cannot accept (its process frozen, or cut off from Redis
   * while its subscriber still listens) costs everyone behind it. Default 1000 ms.
   */
  acceptanceLease?: number;
}

export const FAIR_LOCK_DEFAULTS = { staleWaiterTimeout: 5_000, acceptanceLease: 1_000 } as const;

/**
 * The wait a `lock()` or `tryLock()` call is in, for its attempts: each wait has a waiter id of its own
 * (see waitBehaviour), never its owner's, since any number of waits may share an owner.
 */
const currentWait = new AsyncLocalStorage<{ waiterId?: string }>();

/**
 * Redisson's RFairLock, improved: waiters queue in FIFO order (a list plus a zset of deadlines in
 * Redis server time); the releasing script hands the lock straight to the next live waiter and
 * tells only that waiter, so a hand-off costs one message and no race. Each wait has its own place
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

  override lock(options?: AcquireOptions): Promise<LockHandle> {
    return currentWait.run({}, () => super.lock(options));
  }

  override tryLock(options?: AcquireOptions): Promise<LockHandle | null> {
    return currentWait.run({}, () => super.tryLock(options));
  }

  /** A waiter id: the client's own id (its channel) and a nonce, `<client id>:<nonce>`. */
  private newWaiterId(): string {
    return `${this.engine.clientId}:${randomUUID()}`;
  }

  /** Made at the start of each lock() or tryLock() call: its waiter id, which its attempts queue under. */
  protected override waitBehaviour(): WaitBehaviour {
    const waiterId = this.newWaiterId();
    const wait = currentWait.getStore();
    if (wait) wait.waiterId = waiterId;
    return {
      channel: this.clientChannel,
      waiterId,
      // Retrying refreshes our deadline, and covers a message that got lost.
      maxSleep: Math.max(1, Math.floor(this.staleWaiterTimeout / 3)),
      // A hand-off to a wait of ours that has ended (this channel is our client's, so the wait was ours):
      // passed on now, not after the acceptance lease. Only what was handed to that wait is touched.
      onUnclaimed: (endedWaiterId: string) => void this.leave(endedWaiterId, '').catch(() => undefined),
      // No process-wide re-check and no pass-on of plain wake-ups: the queue and maxSleep cover both.
    };
  }

  protected async attempt({ holder, leaseMs, payload, waiting, holdId }: AttemptRequest): Promise<Attempt<Grant>> {
    // Every attempt runs inside its lock() or tryLock() call, which made the waiter id.
    const waiterId = currentWait.getStore()?.waiterId ?? this.newWaiterId();
    // The release handed us the lock and said so. Accept it before the caller runs: after a failover
    // the message may come from a master whose hand-off the promoted replica never received, and a
    // holder that started on the message alone would overlap the one the new master grants.
    if (payload !== undefined && /^\d+$/.test(payload)) {
      // Idempotent (the hold is recorded under this attempt's id), so sent again through a failover for
      // as long as the hand-off can still be ours.
      const { redis, operationTimeout, idleKeyTtl } = this.engine;
      const accept = () => FAIR_ACCEPT.run(redis, this.keys, { leaseMs, owner: holder, waiterId, holdId, idleKeyTtl });
      const accepted = await retryWhileUnreachable(accept, {
        redis,
        operationTimeout,
        until: monotonicNow() + this.acceptanceLease,
        key: this.name,
        name: 'accept hand-off',
      });
      // Not ours (stale or forged): keep waiting, trying again at once.
      if (!accepted) return { acquired: false, ttl: 0 };
      return { acquired: true, value: { fencingToken: Number(payload), reentered: false } };
    }
    const { staleWaiterTimeout, acceptanceLease } = this;
    const publish = this.engine.publishCommand;
    const [status, value] = await FAIR_LOCK.run(this.engine.redis, this.keys, {
      idleKeyTtl: this.engine.idleKeyTtl,
      leaseMs,
      owner: holder,
      staleWaiterTimeout,
      acceptanceLease,
      publish,
      holdId,
      waiterId,
      // A single attempt (no `waiting`) never queues.
      mode: waiting ? 'wait' : 'once',
    });
    return attemptOutcome(status, value);
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
   * Claims the unanswered attempt's hold if it landed (a grant, a re-entry or an accepted hand-off), or
   * cancels the attempt for good, so that a copy of it still on its way takes nothing (claim-attempt-3.lua).
   */
  protected async grantOfUnknownAttempt(holder: string, holdId: string): Promise<Grant | undefined> {
    return claimedGrant(await CLAIM_ATTEMPT.run(this.engine.redis, this.keys, { holdId, owner: holder }));
  }

  /**
   * A wait that ended without the lock leaves the queue; if the lock was handed to it meanwhile, it is
   * passed on to the next waiter (a single attempt never queued: nothing to do).
   */
  protected override async abandonWait(owner: string, waiterId: string | undefined, waited: boolean): Promise<void> {
    if (!waited || waiterId === undefined) return;
    await this.bounded(this.leave(waiterId, owner), 'abandon wait');
  }

  /**
   * Takes the wait `waiterId` (of `owner`; '' when not known) out of the queue, passing on a hand-off
   * made to it. Through an outage too (it is idempotent): a place left in the queue would be handed the
   * lock by the next release, and cost everyone behind it an acceptance lease.
   */
  private leave(waiterId: string, owner: string): Promise<boolean> {
    const { redis, operationTimeout, publishCommand, idleKeyTtl } = this.engine;
    const args = { waiterId, owner, acceptanceLease: this.acceptanceLease, publish: publishCommand, idleKeyTtl };
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
