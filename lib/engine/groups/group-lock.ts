import { LockAcquireTimeoutError } from '../errors';
import type { ReleaseOutcome } from '../holds/lock-handle';
import type { LockLogger } from '../util/logger';
import type { AcquireOptions } from '../lock/acquire-options';
import { nestedSection, runAsCriticalSection, type OwnerScope } from '../holds/owner-scope';
import { withLock } from '../lock/with-lock';

/** What a lock spanning several locks (MultiLock) or masters (RedLock) hands to its holder. */
export interface GroupLockContext {
  /** Aborts when the group no longer holds what it needs (any lock for MultiLock, the quorum for RedLock). */
  readonly signal: AbortSignal;
  /** The fencing token of each member, in member order (null where a member was not acquired). */
  readonly fencingTokens: (number | null)[];
  extend(leaseTime?: number): Promise<void>;
}

export interface GroupLockHandle extends GroupLockContext {
  release(): Promise<ReleaseOutcome>;
}

/** The acquire / tryLock / withLock surface MultiLock and RedLock share; each supplies `acquire`. */
export abstract class GroupLock<H extends GroupLockHandle> {
  abstract get name(): string;

  /** Where a failed release of the group is reported (a client's logger). */
  protected abstract get logger(): LockLogger;

  /**
   * @internal Whether `scope` holds the group here already: a `withLock` inside it re-enters (see
   * runAsCriticalSection).
   */
  abstract heldInScope(scope: OwnerScope): boolean;

  /** Acquires within `options.waitTime` (undefined: as long as it takes) or resolves null. */
  protected abstract acquire(options: AcquireOptions): Promise<H | null>;

  /** Acquires within `waitTime` (default 0: one round) or resolves null, holding nothing. */
  tryLock(options: AcquireOptions = {}): Promise<H | null> {
    // Options that are not an object go as they are: acquire refuses them with a LockOptionsError.
    if (options === null || typeof options !== 'object') return this.acquire(options);
    return this.acquire({ ...options, waitTime: options.waitTime === undefined ? 0 : options.waitTime });
  }

  /** Acquires, waiting as needed; LockAcquireTimeoutError after `waitTime`. */
  async lock(options: AcquireOptions = {}): Promise<H> {
    const handle = await this.acquire(options);
    if (!handle) throw new LockAcquireTimeoutError(this.name, options.waitTime ?? 0);
    return handle;
  }

  /**
   * Runs `fn` holding the group and releases it however `fn` ends (a failed release is logged). Opened
   * inside another section, it is nested in it, as a single lock's is: a lock that section holds is
   * re-entered from inside this one (and a MultiLock member it holds, under its owner), and the rest is
   * taken under a scope of its own, so sibling sections still exclude each other on it.
   */
  withLock<T>(fn: (context: GroupLockContext) => Promise<T> | T, options: AcquireOptions = {}): Promise<T> {
    return runAsCriticalSection(
      (scope) => this.heldInScope(scope),
      () => withLock(() => this.lock(options), fn, { logger: this.logger, nameOf: () => this.name }),
      { inherit: nestedSection },
    );
  }
}
