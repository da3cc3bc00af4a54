import { type GroupLockHandle } from './group-lock';
import type { LockHandle, ReleaseOutcome } from '../holds/lock-handle';

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
