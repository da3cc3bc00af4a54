import type { RenewalKind } from '../holds/held-lock';
import { claimedGrant } from '../holds/hold-id-calls';
import { LockBase, type Grant } from '../lock/lock-base';
import { CLAIM_ATTEMPT } from '../scripts/catalog';

/**
 * What the reentrant and fair locks share, and only that: the lock is one hash of owner -> hold
 * count (so the two kinds exclude each other on one name) with its holds recorded by id in one
 * grants hash (lua/include/hold-ids.lua), renewed together, its holds countable.
 */
export abstract class HashLock extends LockBase {
  protected readonly renewal: RenewalKind = 'held';

  /** The lock hash, then its holds by id (see lua/include/hold-ids.lua), renewed together. */
  protected override get renewalKeys(): readonly string[] {
    return (this.lockAndGrants ??= [this.keys.lock, this.keys.grants, this.keys.fence]);
  }

  private lockAndGrants?: readonly string[];

  /**
   * Claims the unanswered attempt's hold if it landed (a grant, a re-entry or an accepted hand-off; its
   * lease made at least `leaseMs`: a hand-over may have recorded it with a short one), or cancels the
   * attempt for good, so that a copy of it still on its way takes nothing (claim-attempt-3.lua).
   */
  protected async grantOfUnknownAttempt(holder: string, holdId: string, leaseMs: number): Promise<Grant | undefined> {
    const { redis, idleKeyTtl } = this.engine;
    return claimedGrant(await CLAIM_ATTEMPT.run(redis, this.keys, { holdId, owner: holder, leaseMs, idleKeyTtl }));
  }

  /** Whether the current lock scope's owner holds this lock. */
  async isHeldByCurrentScope(): Promise<boolean> {
    return (await this.getHoldCount()) > 0;
  }

  /** How many holds the current scope's owner (or `owner`) has on this lock; 0 when none. */
  getHoldCount(owner = this.scopeOwner()): Promise<number> {
    return this.holdCount(this.keys.lock, owner);
  }
}
