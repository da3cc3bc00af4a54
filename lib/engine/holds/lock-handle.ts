import type { HeldLock } from './held-lock';
import type { LockLostError } from '../errors';
import type { ReleaseOutcome } from './release-outcome';

export type { ReleaseOutcome } from './release-outcome';

/** What the work inside `withLock` (or a decorated method) can use. */
export interface LockContext {
  /** Aborts with a LockLostError if the lock is lost while the work runs. */
  readonly signal: AbortSignal;
  /** Strictly increasing per lock name: pass it to the guarded resource so it can reject stale holders. */
  readonly fencingToken: number;
  /** Renews the lease now (watchdog leases) or sets it to `leaseTime` ms. Throws LockLostError if lost. */
  extend(leaseTime?: number): Promise<void>;
}

/**
 * One acquisition. Reentrant acquisitions by the same owner share the lock's record (token, signal);
 * each handle releases exactly one hold, once: releasing twice returns the first outcome.
 */
export class LockHandle implements LockContext, AsyncDisposable {
  private releasing?: Promise<ReleaseOutcome>;

  /** `holdId`: the hold this acquisition took (see lua/include/hold-ids.lua), the one it releases. */
  constructor(
    private readonly held: HeldLock,
    private readonly holdId: string,
  ) {}

  get name(): string {
    return this.held.name;
  }

  /**
   * The id Redis records the hold under (what inspect shows): the owner's own, or a simple lock's token.
   */
  get owner(): string {
    return this.held.owner;
  }

  get fencingToken(): number {
    return this.held.fencingToken;
  }

  get signal(): AbortSignal {
    return this.held.controller.signal;
  }

  /** Holds this owner has on the lock as this client knows them (1 = first acquisition). */
  get holdCount(): number {
    return this.held.holdCount;
  }

  /** True once the lock was lost (see `signal`). */
  get isLost(): boolean {
    return this.held.lost;
  }

  release(): Promise<ReleaseOutcome> {
    if (!this.releasing) {
      this.releasing = this.held.has(this.holdId)
        ? this.held.release(this.holdId)
        : // Released already by an unlock() of its owner (the newest hold first): nothing left to release.
          Promise.resolve(this.held.released || this.held.holdCount === 0 ? 'released' : 'decremented');
      // A release that failed (Redis unreachable) may be retried.
      this.releasing.catch(() => (this.releasing = undefined));
    }
    return this.releasing;
  }

  extend(leaseTime?: number): Promise<void> {
    return this.held.extend(leaseTime);
  }

  /**
   * @internal A RedLock's vote on one master: `onRenewed` hears each watchdog renewal (see
   * HeldLock.onRenewed), `onLost` its loss, which is left to the RedLock to report.
   */
  asVote(onRenewed: (sentAtMonotonic: number, leaseMs: number) => void, onLost: (error: LockLostError) => void): void {
    this.held.onRenewed = onRenewed;
    this.held.onLost = onLost;
    this.held.reportsLoss = false;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
