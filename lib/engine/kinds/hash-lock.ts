import type { RenewalKind } from '../holds/held-lock';
import { LockBase } from '../lock/lock-base';

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

  /** Whether the current lock scope's owner holds this lock. */
  async isHeldByCurrentScope(): Promise<boolean> {
    return (await this.getHoldCount()) > 0;
  }

  /** How many holds the current scope's owner (or `owner`) has on this lock; 0 when none. */
  getHoldCount(owner = this.scopeOwner()): Promise<number> {
    return this.holdCount(this.keys.lock, owner);
  }
}
