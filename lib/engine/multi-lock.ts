import { LockAcquireTimeoutError, LockOptionsError } from './errors';
import type { LockBase } from './lock-base';
import type { LockHandle, ReleaseOutcome } from './lock-handle';
import type { AcquireOptions } from './options';
import { runInLockScope } from './owner-scope';

/** What the work inside a MultiLock or RedLock can use. */
export interface MultiLockContext {
  /** Aborts when the group no longer holds what it needs (any lock for MultiLock, the quorum for RedLock). */
  readonly signal: AbortSignal;
  /** The fencing token of each member lock, in member order (null where a member was not acquired). */
  readonly fencingTokens: (number | null)[];
  extend(leaseTime?: number): Promise<void>;
}

/** Several locks held as one: released together, lost together. */
export class MultiLockHandle implements MultiLockContext, AsyncDisposable {
  readonly signal: AbortSignal;

  constructor(readonly handles: (LockHandle | null)[]) {
    this.signal = AbortSignal.any(handles.flatMap((h) => (h ? [h.signal] : [])));
  }

  get fencingTokens(): (number | null)[] {
    return this.handles.map((h) => h?.fencingToken ?? null);
  }

  /** Releases every member; `released` when at least one member was still held. */
  async release(): Promise<ReleaseOutcome> {
    const outcomes = await Promise.all(
      this.handles.map((h) => h?.release() ?? Promise.resolve<ReleaseOutcome>('expired')),
    );
    return outcomes.includes('released') || outcomes.includes('decremented') ? 'released' : 'expired';
  }

  async extend(leaseTime?: number): Promise<void> {
    await Promise.all(this.handles.map((h) => h?.extend(leaseTime)));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/**
 * Redisson's MultiLock: several locks of any kind, on one client or several, held all-or-nothing.
 * Members are acquired in one global order (by key), so two MultiLocks over overlapping sets
 * cannot deadlock; a partial acquisition is released at once.
 * @example
 * const transfer = new MultiLock([locks.getLock(`account:${from}`), locks.getLock(`account:${to}`)]);
 * await transfer.withLock(() => moveMoney(from, to, amount));
 */
export class MultiLock {
  private readonly ordered: LockBase[];

  constructor(readonly locks: LockBase[]) {
    if (!Array.isArray(locks) || locks.length === 0) throw new LockOptionsError('MultiLock needs at least one lock.');
    this.ordered = [...locks].sort((a, b) => (a.keys.lock < b.keys.lock ? -1 : a.keys.lock > b.keys.lock ? 1 : 0));
  }

  get name(): string {
    return this.locks.map((l) => l.name).join('+');
  }

  /** Acquires every member within `waitTime` (default 0) or resolves null, holding none of them. */
  async tryLock(options: AcquireOptions = {}): Promise<MultiLockHandle | null> {
    return this.acquire({ ...options, waitTime: options.waitTime ?? 0 });
  }

  /** Acquires every member, waiting as long as needed (or throwing LockAcquireTimeoutError after `waitTime`). */
  async lock(options: AcquireOptions = {}): Promise<MultiLockHandle> {
    const handle = await this.acquire(options);
    if (!handle) throw new LockAcquireTimeoutError(this.name, options.waitTime ?? 0);
    return handle;
  }

  withLock<T>(fn: (context: MultiLockContext) => Promise<T> | T, options: AcquireOptions = {}): Promise<T> {
    return runInLockScope(async () => {
      const handle = await this.lock(options);
      try {
        return await fn(handle);
      } finally {
        await handle.release().catch(() => undefined); // each member's lease runs out by itself
      }
    });
  }

  private async acquire(options: AcquireOptions): Promise<MultiLockHandle | null> {
    const deadline = options.waitTime === undefined ? undefined : Date.now() + options.waitTime;
    const held = new Map<LockBase, LockHandle>();
    try {
      for (const lock of this.ordered) {
        const waitTime = deadline === undefined ? undefined : Math.max(0, deadline - Date.now());
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
    return new MultiLockHandle(this.locks.map((lock) => held.get(lock)!));
  }
}

async function releaseAll(handles: LockHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.release().catch(() => undefined)));
}
