import { monotonicNow } from '../util/clock';
import { LockOptionsError } from '../errors';
import { GroupLock, type GroupLockContext, type GroupLockHandle } from './group-lock';
import type { LockBase } from '../kinds/lock-base';
import type { LockHandle, ReleaseOutcome } from '../holds/lock-handle';
import type { LockLogger } from '../util/logger';
import { multiLockMembers } from './multi-lock-members';
import { checkAcquireOptions, type AcquireOptions } from '../kinds/options';
import type { OwnerScope } from '../holds/owner-scope';

/** What the work inside a MultiLock or RedLock can use. */
export type MultiLockContext = GroupLockContext;

/** Several locks held as one: released together, lost together. */
export class MultiLockHandle implements GroupLockHandle, AsyncDisposable {
  readonly signal: AbortSignal;
  /** Each hold once: a lock given twice has one hold in both its places. */
  private readonly held: LockHandle[];

  /** `handles`: one per lock as given (the same handle where a lock was given twice). */
  constructor(readonly handles: (LockHandle | null)[]) {
    this.held = [...new Set(handles.flatMap((h) => (h ? [h] : [])))];
    this.signal = AbortSignal.any(this.held.map((h) => h.signal));
  }

  get fencingTokens(): (number | null)[] {
    return this.handles.map((h) => h?.fencingToken ?? null);
  }

  /** Releases every member; `released` when at least one member was still held. */
  async release(): Promise<ReleaseOutcome> {
    const outcomes = await Promise.all(this.held.map((h) => h.release()));
    if (outcomes.includes('released') || outcomes.includes('decremented')) return 'released';
    return outcomes.includes('pending') ? 'pending' : 'expired';
  }

  async extend(leaseTime?: number): Promise<void> {
    await Promise.all(this.held.map((h) => h.extend(leaseTime)));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/**
 * Redisson's MultiLock: several locks of any kind, on one client or several, held all-or-nothing.
 * Members are acquired in one order every process shares (by key, then by Redis deployment: see
 * multiLockMembers), so two MultiLocks over overlapping sets cannot deadlock; a partial acquisition
 * is released at once. A lock given twice is taken once; one name given with two kinds on one
 * deployment is a LockOptionsError.
 * @example
 * const transfer = new MultiLock([locks.getLock(`account:${from}`), locks.getLock(`account:${to}`)]);
 * await transfer.withLock(() => moveMoney(from, to, amount));
 */
export class MultiLock extends GroupLock<MultiLockHandle> {
  /** The distinct locks, in the order they are taken. */
  private readonly ordered: readonly LockBase[];
  /** For each lock as given, the one of `ordered` taken for it. */
  private readonly memberFor: readonly LockBase[];

  constructor(readonly locks: LockBase[]) {
    super();
    if (!Array.isArray(locks) || locks.length === 0) throw new LockOptionsError('MultiLock needs at least one lock.');
    ({ ordered: this.ordered, memberFor: this.memberFor } = multiLockMembers(locks));
  }

  get name(): string {
    return this.locks.map((l) => l.name).join('+');
  }

  /** Held in `scope` when one of its locks is: the scope re-enters that one and takes the others under the same owner. */
  heldInScope(scope: OwnerScope): boolean {
    return this.ordered.some((lock) => lock.heldInScope(scope));
  }

  /** The first lock's client's. */
  protected get logger(): LockLogger {
    return this.locks[0].logger;
  }

  protected async acquire(options: AcquireOptions): Promise<MultiLockHandle | null> {
    options = checkAcquireOptions(this.name, options); // before any member is tried
    const deadline = options.waitTime === undefined ? undefined : monotonicNow() + options.waitTime;
    const held = new Map<LockBase, LockHandle>();
    try {
      for (const lock of this.ordered) {
        const waitTime = deadline === undefined ? undefined : Math.max(0, deadline - monotonicNow());
        const handle = waitTime === undefined ? await lock.lock(options) : await lock.tryLock({ ...options, waitTime });
        if (!handle) {
          await releaseAll([...held.values()]);
          return null;
        }
        held.set(lock, handle);
      }
    } catch (error) {
      await releaseAll([...held.values()]);
      throw error;
    }
    return new MultiLockHandle(this.memberFor.map((lock) => held.get(lock)!));
  }
}

async function releaseAll(handles: LockHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.release().catch(() => undefined)));
}
