import { type GroupLockHandle } from './group-lock';
import type { LockHandle, ReleaseOutcome } from '../holds/lock-handle';
import { onAbort } from '../waiting/abort-fan-out';

/** Several locks held as one: released together, lost together. */
export class MultiLockHandle implements GroupLockHandle, AsyncDisposable {
  /** Each hold once: a lock given twice has one hold in both its places. */
  private readonly held: LockHandle[];
  private lost?: AbortController;
  private stopListening?: () => void;

  /** `handles`: one per lock as given (the same handle where a lock was given twice). */
  constructor(readonly handles: (LockHandle | null)[]) {
    this.held = [...new Set(handles.flatMap((h) => (h ? [h] : [])))];
  }

  /**
   * Aborts with the first member's loss. Listened for through the members' shared fan-out until the
   * release, not made with AbortSignal.any: on Node 20 each signal that makes stays referenced from its
   * sources for good, and a member re-entered inside a long-held lock lives as long as that lock.
   */
  get signal(): AbortSignal {
    if (this.lost) return this.lost.signal;
    const lost = (this.lost = new AbortController());
    const abortWithLoss = (): void => {
      const first = this.held.find((h) => h.signal.aborted);
      if (first) lost.abort(first.signal.reason);
    };
    abortWithLoss();
    if (!lost.signal.aborted) {
      const stops = this.held.map((h) => onAbort(h.signal, abortWithLoss));
      this.stopListening = () => stops.forEach((stop) => stop());
    }
    return lost.signal;
  }

  get fencingTokens(): (number | null)[] {
    return this.handles.map((h) => h?.fencingToken ?? null);
  }

  /** Releases every member; `released` when at least one member was still held. */
  async release(): Promise<ReleaseOutcome> {
    const outcomes = await Promise.all(this.held.map((h) => h.release()));
    this.stopListening?.();
    this.stopListening = undefined;
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
