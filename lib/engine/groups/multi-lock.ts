import { monotonicNow } from '../util/clock';
import { LockLostError, LockOptionsError } from '../errors';
import { GroupLock, type GroupLockContext } from './group-lock';
import { delay } from './release-watch';
import { LockBase } from '../lock/lock-base';
import type { LockHandle } from '../holds/lock-handle';
import type { LockLogger } from '../util/logger';
import { multiLockMembers } from './multi-lock-members';
import { checkAcquireOptions, type AcquireOptions } from '../lock/acquire-options';
import { assertBelievableLease } from '../lock/believable-lease';
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

  private leaseNeverSuffices(options: AcquireOptions): LockOptionsError {
    return new LockOptionsError(
      `MultiLock "${this.name}": a leaseTime of ${String(options.leaseTime)} ms runs out before its ` +
        `${this.ordered.length} locks can be taken, even with none held elsewhere: no attempt can ever hold ` +
        'them all. Give a longer leaseTime, or none (the watchdog renews the locks while held).',
      this.name,
      { option: 'leaseTime', value: options.leaseTime },
    );
  }

  /** The first lock's client's. */
  protected get logger(): LockLogger {
    return this.locks[0].logger;
  }

  protected async acquire(options: AcquireOptions): Promise<MultiLockHandle | null> {
    const given = options;
    options = checkAcquireOptions(this.name, options); // before any member is tried
    for (const lock of this.ordered)
      assertBelievableLease(this.name, options.leaseTime, given.leaseTime, lock.driftFactor);
    const deadline = options.waitTime === undefined ? undefined : monotonicNow() + options.waitTime;
    for (let lostRounds = 0; ; lostRounds++) {
      // An unbounded wait that keeps losing a member: this round waits for none (see LEASE_CHECK_EVERY).
      const leaseCheck = deadline === undefined && lostRounds > 0 && lostRounds % LEASE_CHECK_EVERY === 0;
      const held = new Map<LockBase, LockHandle>();
      let busy = false;
      try {
        for (const lock of this.ordered) {
          const waitTime = leaseCheck ? 0 : deadline === undefined ? undefined : Math.max(0, deadline - monotonicNow());
          const handle =
            waitTime === undefined ? await lock.lock(options) : await lock.tryLock({ ...options, waitTime });
          if (!handle) {
            await releaseAll([...held.values()]);
            if (!leaseCheck) return null;
            busy = true;
            break;
          }
          held.set(lock, handle);
        }
      } catch (error) {
        await releaseAll([...held.values()]);
        // A member whose lease can never be held here (its grants all come too late): the group's lease.
        if (error instanceof LockOptionsError && error.option === 'leaseTime') throw this.leaseNeverSuffices(options);
        throw error;
      }
      if (busy) continue; // a member is held elsewhere: the check tells nothing, and the next round waits for it
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
      if (leaseCheck && reason instanceof LockLostError && reason.reason === 'lease-expired') {
        throw this.leaseNeverSuffices(options);
      }
      if (deadline !== undefined && monotonicNow() >= deadline) return null;
      options.signal?.throwIfAborted();
      // Not at once: the lease may be shorter than it takes to gather the members, every time.
      const pause = lostRoundPause(lostRounds);
      await delay(
        deadline === undefined ? pause : Math.min(pause, Math.max(0, deadline - monotonicNow())),
        options.signal,
      );
      options.signal?.throwIfAborted();
    }
  }
}

/**
 * The pause after the `lostRounds`+1-th round in a row in which a member ran out before the last was
 * taken: doubled each time from LOST_ROUND_PAUSE_MS up to MAX_LOST_ROUND_PAUSE_MS, half of it random
 * (two MultiLocks pausing alike do not meet again).
 */
function lostRoundPause(lostRounds: number): number {
  const pause = Math.min(MAX_LOST_ROUND_PAUSE_MS, LOST_ROUND_PAUSE_MS * 2 ** Math.min(lostRounds, 10));
  return pause / 2 + (Math.random() * pause) / 2;
}

const LOST_ROUND_PAUSE_MS = 10;
const MAX_LOST_ROUND_PAUSE_MS = 1_000;
/**
 * Every this many rounds in a row that lost a member, an unbounded wait (no waitTime) takes the members
 * once with single attempts, waiting for none: if one still runs out before the last is taken, the
 * lease is shorter than gathering them takes, so no round ever can, and LockOptionsError says so
 * instead of a wait that never ends.
 */
const LEASE_CHECK_EVERY = 4;

async function releaseAll(handles: LockHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.release().catch(() => undefined)));
}
