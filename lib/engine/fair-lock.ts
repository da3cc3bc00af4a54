import { randomUUID } from 'node:crypto';
import type { Attempt } from './acquire-loop';
import type { LockKindName } from './lock-events';
import type { EngineContext } from './engine-context';
import { HashLock } from './hash-lock';
import { attemptOutcome, type AttemptRequest, type Grant, type RawRelease, type WaitBehaviour } from './lock-base';
import { checkDuration, TIMEOUT_RULE } from './validation';
import { retryWhileUnreachable } from './retry-while-unreachable';
import { FAIR_ABANDON, FAIR_ACCEPT, FAIR_FORCE_UNLOCK, FAIR_LOCK, FAIR_UNLOCK } from './scripts/catalog';

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
 * Redisson's RFairLock, improved: waiters queue in FIFO order (a list plus a zset of deadlines in
 * Redis server time); the releasing script hands the lock straight to the next live waiter and
 * tells only that waiter, so a hand-off costs one message and no race. Re-entrant like the
 * reentrant lock, and mutually exclusive with it on the same name.
 * @example
 * await locks.getFairLock('ticket-counter').withLock(() => serveNext());
 */
export class FairLock extends HashLock {
  readonly kind: LockKindName = 'fair';
  // Strict FIFO: every release hands the lock to the queue head, whichever process it is in, so
  // processes take no turns (LockBase's takesTurns stays false).
  private readonly staleWaiterTimeout: number;
  private readonly acceptanceLease: number;

  constructor(engine: EngineContext, name: string, options: FairLockOptions = {}) {
    super(engine, name);
    this.staleWaiterTimeout =
      checkDuration(name, 'staleWaiterTimeout', options.staleWaiterTimeout, TIMEOUT_RULE) ??
      FAIR_LOCK_DEFAULTS.staleWaiterTimeout;
    this.acceptanceLease =
      checkDuration(name, 'acceptanceLease', options.acceptanceLease, TIMEOUT_RULE) ??
      FAIR_LOCK_DEFAULTS.acceptanceLease;
  }

  /** Each process listens on its own channel per lock; the message names the waiter to wake. */
  private channelFor(owner: string): string {
    return `${this.keys.channel}:${owner.split(':', 1)[0]}`;
  }

  protected override waitBehaviour(owner: string): WaitBehaviour {
    return {
      channel: this.channelFor(owner),
      waiterId: owner,
      // Retrying refreshes our deadline, and covers a message that got lost.
      maxSleep: Math.max(1, Math.floor(this.staleWaiterTimeout / 3)),
      // Handed to a waiter of ours that has just given up: pass it on now, not after the acceptance lease.
      onUnclaimed: (waiterId: string) => void this.abandonWait(waiterId).catch(() => undefined),
      // No process-wide re-check and no pass-on of plain wake-ups: the queue and maxSleep cover both.
    };
  }

  protected async attempt({ owner, leaseMs, payload, heldBefore }: AttemptRequest): Promise<Attempt<Grant>> {
    // The release handed us the lock and said so. Accept it before the caller runs: after a failover
    // the message may come from a master whose hand-off the promoted replica never received, and a
    // holder that started on the message alone would overlap the one the new master grants.
    if (payload !== undefined && /^\d+$/.test(payload)) {
      // Idempotent, so sent again through a failover for as long as the hand-off can still be ours.
      const { redis, operationTimeout } = this.engine;
      const accepted = await retryWhileUnreachable(() => FAIR_ACCEPT.run(redis, this.keys, { leaseMs, owner }), {
        redis,
        operationTimeout,
        until: Date.now() + this.acceptanceLease,
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
      leaseMs,
      owner,
      staleWaiterTimeout,
      acceptanceLease,
      publish,
      heldBefore,
    });
    return attemptOutcome(status, value);
  }

  protected releaseOnce(owner: string, leaseMs: number, expectedHolds?: number): Promise<RawRelease> {
    return FAIR_UNLOCK.run(this.engine.redis, this.keys, {
      owner,
      leaseMs,
      acceptanceLease: this.acceptanceLease,
      publish: this.engine.publishCommand,
      expectedHolds: expectedHolds ?? '',
    });
  }

  /** Leaves the queue; if the lock was handed to us meanwhile, passes it on to the next waiter. */
  protected override async abandonWait(owner: string): Promise<void> {
    const { redis, operationTimeout, registry } = this.engine;
    // Through an outage too (both steps are idempotent): a place left in the queue would be handed
    // the lock by the next release, and cost everyone behind it an acceptance lease.
    const retry = { redis, operationTimeout, until: Date.now() + this.staleWaiterTimeout, key: this.name };
    const leave = (async () => {
      const handedToUs = await retryWhileUnreachable(() => FAIR_ABANDON.run(redis, this.keys, { owner }), {
        ...retry,
        name: 'abandon wait',
      });
      if (handedToUs) {
        await retryWhileUnreachable(() => this.releaseOnce(owner, this.acceptanceLease), { ...retry, name: 'pass on' });
      }
    })();
    registry.inFlightFor(
      this.keys.lock,
      owner,
      leave.catch(() => undefined),
    );
    // The caller waits for it as long as one operation may take; past that it goes on in the background.
    await this.bounded(leave, 'abandon wait');
  }

  /** Deletes the lock whoever holds it and hands it to the next waiter. True when it was locked. */
  override async forceUnlock(): Promise<boolean> {
    const { redis, publishCommand } = this.engine;
    const force = FAIR_FORCE_UNLOCK.run(redis, this.keys, {
      acceptanceLease: this.acceptanceLease,
      publish: publishCommand,
      callId: randomUUID(),
    });
    return this.bounded(force, 'forceUnlock');
  }
}
