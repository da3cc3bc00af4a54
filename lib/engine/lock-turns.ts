import { closedForGood } from './connection-end';
import type { EngineContext } from './engine-context';
import { isOutage } from './outage';
import type { HeldLock, Lendable } from './held-lock';
import { LentLeases } from './lent-leases';
import type { Grant } from './lock-base';
import type { LockKindName } from './lock-events';
import { LEND_WITHIN_MS, type DeferredRelease, type HandOver } from './process-turns';
import type { ReleaseReplayer } from './recent-releases';
import type { ReleaseReply } from './scripts/replies';

/** A release is deferred only while the hold's lease has at least this long to run. */
const MIN_DEFERRED_LEASE_MS = 1_000;

/** What a lock that takes turns lends its LockTurns. */
export interface TurnTaker {
  /** The lock itself, which sends a release again after a failover (see RecentReleases). */
  readonly replayer: ReleaseReplayer;
  readonly kind: LockKindName;
  readonly name: string;
  /** The lock's key, the one ProcessTurns keeps turns by. */
  readonly key: string;
  /** The channel this process's waiters for the lock listen on (see wake-one-process.lua). */
  readonly processChannel: string;
  /** A deferred release sent on its own, passing the lock on (bounded like any operation). */
  sendRelease(release: DeferredRelease): Promise<ReleaseReply>;
  /** The same, sent again in the background until it lands or its lease is over. */
  sendReleaseInBackground(release: DeferredRelease): void;
  /** Leaves the waiting registry and wakes the next process if the lock is free. */
  passWakeUp(): Promise<void>;
  /** Sets a hold's lease in Redis to end at `until` (see LentLeases); true when the hold was there to renew. */
  renewLease(held: HeldLock, until: number): Promise<boolean>;
}

/**
 * One lock's part in its process's turns (see ProcessTurns): what a reentrant or simple lock does
 * around each attempt and each release so that, while other processes wait, the process keeps the
 * lock for a turn and its releases ride on its next attempt.
 */
export class LockTurns {
  /** Made once, shared by this lock's deferred releases (no closure per release on a hot key). */
  private readonly sendDeferred = (release: DeferredRelease): Promise<void> => this.sendAlone(release);

  constructor(
    private readonly engine: EngineContext,
    private readonly lock: TurnTaker,
  ) {}

  /** Before an attempt: the release this process deferred in its turn, which the attempt carries. */
  attempting(): DeferredRelease | undefined {
    const { turns } = this.engine;
    turns.attempting(this.lock.key);
    return turns.takeDeferred(this.lock.key, this.lock.kind);
  }

  /**
   * The next attempt will carry this process's own release of the lock, made in its turn: the lock is
   * still this process's in Redis, so that attempt is granted unless the hold was lost meanwhile.
   */
  carriesRelease(): boolean {
    return this.engine.turns.hasDeferred(this.lock.key, this.lock.kind);
  }

  /** The attempt that carried `prior` was answered: that release landed. */
  carried(prior: DeferredRelease): void {
    const { holder, holdId, leaseMs } = prior;
    this.engine.recentReleases.note(this.lock.replayer, this.lock.key, holder, holdId, leaseMs);
  }

  /**
   * The hold this process released in its turn (`prior`, taken by an attempt), lent as it stands in
   * Redis to that attempt, which needs no round trip then: the lock never left this process, and no
   * other process could have it before the turn passes anyway. Returns the lent hold's fencing token
   * and what remains lendable, or undefined when the attempt must go to Redis (carrying `prior`):
   * - the hold had no spare tokens, or its turn is over (its release must pass the lock on);
   * - Redis last confirmed it over LEND_WITHIN_MS ago, or half its lease may have run out (a watchdog
   *   renewal may have been missed while it was released);
   * - one of the two leases is the watchdog's and the other explicit, or the hold's lease lasts longer
   *   than the `leaseMs` this acquisition asks for: a lent explicit lease never lasts longer than
   *   asked, and is renewed to last as long if it is held long enough to need it (see lent).
   */
  lend(
    prior: DeferredRelease,
    watched: boolean,
    leaseMs: number,
  ): { fencingToken: number; lendable?: Lendable } | undefined {
    const { lendable } = prior;
    if (lendable === undefined || watched !== prior.watched) return undefined;
    const now = Date.now();
    const left = prior.expiresAt - now;
    if (now - lendable.confirmedAt > LEND_WITHIN_MS || left < prior.leaseMs / 2) return undefined;
    if (!watched && left > leaseMs) return undefined;
    if (this.handOverFor() !== 'keep') return undefined;
    const fencingToken = lendable.nextToken;
    const { lastToken, confirmedAt } = lendable;
    const rest = fencingToken < lastToken ? { nextToken: fencingToken + 1, lastToken, confirmedAt } : undefined;
    return { fencingToken, lendable: rest };
  }

  /** `held` was lent (see lend): an explicit lease is renewed if it is held long enough to need it. */
  lent(held: HeldLock): void {
    if (held.watched) return; // the watchdog renews it
    this.leases ??= new LentLeases((lent, until) => this.lock.renewLease(lent, until));
    this.leases.lent(held);
  }

  /** `held`'s lease was set in Redis since (`extend()`, a re-entry): a lent lease is owed nothing more (see LentLeases). */
  extended(held: HeldLock): void {
    this.leases?.extended(held);
  }

  private leases?: LentLeases;

  /**
   * Whether a hold granted now may be lent on later, so that it should be taken under an id of the
   * process's own with a block of fencing tokens: `carrying` a release of the turn, while the turn
   * lasts; otherwise a waiter's grant (a contended turn may begin with it), unless turns are off.
   */
  mayLendLater(carrying: boolean, waited: boolean): boolean {
    if (carrying) return this.handOverFor() === 'keep';
    return waited && this.engine.turns.keepsTurns;
  }

  /**
   * The spare fencing tokens of a grant that asked for `tokens` of them (see mayLendLater), which its
   * process may lend on: the script took a block only for a first grant made while others waited.
   */
  spareTokens(grant: Grant, tokens: number, confirmedAt: number): Lendable | undefined {
    if (tokens === 1 || grant.othersWaiting !== true || grant.reentered) return undefined;
    return { nextToken: grant.fencingToken + 1, lastToken: grant.fencingToken + tokens - 1, confirmedAt };
  }

  /** A first hold (not a re-entry) was granted: a turn begins, if none runs; `contended`: others wait. */
  granted(contended: boolean): void {
    this.engine.turns.granted(this.lock.key, contended);
  }

  /** How a last release should leave the lock: kept in this process's turn, or passed on. */
  handOverFor(): HandOver {
    return this.engine.turns.handOverFor(this.lock.key);
  }

  /**
   * Inside a turn of a lock other processes wait for, the last release of a hold whose lease cannot
   * run out before the next macrotask waits for this process's next attempt on the lock and goes with
   * it in one script (see ProcessTurns.deferRelease); a parked waiter of this process is woken to make
   * that attempt. True when it was deferred: the caller tells its own caller 'released' at once, since
   * the processes waiting elsewhere could not have the lock before the turn passes anyway. A hold known
   * to be lost is never deferred: it must not be lent on, and Redis tells its release how it ended.
   */
  deferred(held: HeldLock, holdId: string): boolean {
    const { turns, waiters } = this.engine;
    const leaseLasts = held.watched || held.expiresAt - Date.now() > MIN_DEFERRED_LEASE_MS;
    if (held.lost || !leaseLasts || !turns.mayDefer(held.key)) return false;
    held.markReleased();
    turns.deferRelease(held.key, {
      kind: this.lock.kind,
      holder: held.owner,
      holdId,
      leaseMs: held.leaseMs,
      watched: held.watched,
      expiresAt: held.expiresAt,
      lendable: held.lendable,
      send: this.sendDeferred,
    });
    waiters.wakeParked(this.lock.processChannel);
    return true;
  }

  /** A release made with `handOver` came back `raw` (and was not deferred). */
  released(handOver: HandOver, raw: ReleaseReply): void {
    if (raw === 'kept') this.keep();
    else if (raw === 'released') {
      this.engine.turns.end(this.lock.key);
      // Released in the turn with no other process waiting (keep sends no message): this process's
      // own parked waiters, if any, take it from here.
      if (handOver === 'keep') this.engine.waiters.wakeParked(this.lock.processChannel);
    }
  }

  /**
   * Released in this process's turn while other processes wait: a parked waiter of this process takes
   * the lock now, or this process asks for it again at once, or it is passed on.
   */
  private keep(): void {
    const { waiters, turns } = this.engine;
    const { key, processChannel } = this.lock;
    turns.kept(key);
    if (waiters.wakeParked(processChannel)) return;
    turns.passIfIdle(
      key,
      () => waiters.memberCount(processChannel) > 0,
      () => this.lock.passWakeUp(),
    );
  }

  /** A deferred release that no attempt took: sent on its own, passing the lock on. */
  private async sendAlone(release: DeferredRelease): Promise<void> {
    try {
      const raw = await this.lock.sendRelease(release);
      if (raw === 'released' || raw === 'kept') this.carried(release);
    } catch (error) {
      if (isOutage(error) && !closedForGood(this.engine.redis)) {
        this.lock.sendReleaseInBackground(release);
      } else {
        this.engine.logger.warn(`Could not release lock "${this.lock.name}": ${(error as Error).message}`);
      }
    }
  }
}
