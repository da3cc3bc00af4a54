import { monotonicNow } from '../util/clock';
import { LockLostError, LockOptionsError } from '../errors';
import { GroupLock, type GroupLockContext } from './group-lock';
import { LockBase } from '../lock/lock-base';
import type { LockHandle } from '../holds/lock-handle';
import type { LockLogger } from '../util/logger';
import { multiLockMembers } from './multi-lock-members';
import { checkAcquireOptions, type AcquireOptions } from '../lock/acquire-options';
import type { OwnerScope } from '../holds/owner-scope';
import { MultiLockHandle } from './multi-lock-handle';

/** What the work inside a MultiLock or RedLock can use. */
export type MultiLockContext = GroupLockContext;

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
    // A value that is not a lock would fail as a TypeError while the members are ordered.
    if (!Array.isArray(locks) || locks.length === 0 || locks.some((lock) => !(lock instanceof LockBase))) {
      throw new LockOptionsError('MultiLock needs at least one lock, and locks only.', undefined, {
        option: 'locks',
        value: locks,
      });
    }
    ({ ordered: this.ordered, memberFor: this.memberFor } = multiLockMembers(locks));
  }

  get name(): string {
    return this.locks.map((l) => l.name).join('+');
  }

  /**
   * Held in `scope` when all of its locks are: the scope re-enters them. Taking the locks the scope does
   * not hold under its owner would let every concurrent branch of the scope (Promise.all) re-enter them.
   */
  heldInScope(scope: OwnerScope): boolean {
    return this.ordered.every((lock) => lock.heldInScope(scope));
  }

  /** Some of its locks held in `scope`: a section of its own re-enters those and takes the others under its own owner. */
  protected override inheritsFrom(scope: OwnerScope): boolean {
    return this.ordered.some((lock) => lock.heldInScope(scope));
  }

  /** The first lock's client's. */
  protected get logger(): LockLogger {
    return this.locks[0].logger;
  }

  protected async acquire(options: AcquireOptions): Promise<MultiLockHandle | null> {
    options = checkAcquireOptions(this.name, options); // before any member is tried
    const deadline = options.waitTime === undefined ? undefined : monotonicNow() + options.waitTime;
    for (;;) {
      const held = new Map<LockBase, LockHandle>();
      try {
        for (const lock of this.ordered) {
          const waitTime = deadline === undefined ? undefined : Math.max(0, deadline - monotonicNow());
          const handle =
            waitTime === undefined ? await lock.lock(options) : await lock.tryLock({ ...options, waitTime });
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
      const handles = [...held.values()];
      // A member taken with a leaseTime can run out (or be lost) while a later one is awaited: the group
      // was then never held as a whole, and another process may hold that member now. Given back, and
      // taken again while the wait lasts, never handed over as held.
      const lost = handles.find((h) => h.isLost);
      if (!lost) return new MultiLockHandle(this.memberFor.map((lock) => held.get(lock)!));
      await releaseAll(handles);
      // Its client closed (shutdown): that is the answer, not a reason to take the member again through it.
      const reason: unknown = lost.signal.reason;
      if (reason instanceof LockLostError && reason.reason === 'closed') throw reason;
      if (deadline !== undefined && monotonicNow() >= deadline) return null;
      options.signal?.throwIfAborted();
    }
  }
}

async function releaseAll(handles: LockHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.release().catch(() => undefined)));
}
