import type { LockLostReason } from './errors';
import type { LockHandleOps } from './lock-handle';
import { setLongTimeout, type LongTimer } from './long-timer';

/**
 * How a lock is renewed: `hash` when the owner is a field of the lock hash (reentrant, fair lock,
 * write side of a read-write lock), `string` when the lock's value is the owner's token (simple lock),
 * `read` for a read hold (its expiry in the readers zset; renewalKeys: that zset, then the read counts),
 * `permit` when the owner is a member of a semaphore's holds (its score the lease's end).
 */
export type RenewalKind = 'hash' | 'string' | 'read' | 'permit';

/**
 * The local record of a lock this client holds for one owner: hold count, lease, fencing token and
 * the AbortController whose signal tells the holder the lock was lost. Every handle of a reentrant
 * hold shares it.
 */
export class HeldLock {
  /** Made when first asked for: most holds are released without anyone reading their signal. */
  private abortController?: AbortController;
  holdCount = 1;
  lost = false;
  /** Redis reported the last hold released; later releases of it are no-ops. */
  released = false;
  /** Conservative local estimate of when Redis lets the lease run out (ms since epoch). */
  expiresAt: number;
  /** For explicit leases: fires when the lease runs out, so the holder learns it at once. */
  expiryTimer?: LongTimer;
  /** AcquireOptions.label of the first hold, for events and metrics. */
  label?: string;
  /** When this client learnt of the grant (ms since epoch). */
  readonly grantedAt = Date.now();

  constructor(
    readonly name: string,
    readonly key: string,
    readonly owner: string,
    public leaseMs: number,
    /** Renewed by the watchdog (no explicit leaseTime). */
    public watched: boolean,
    readonly fencingToken: number,
    readonly renewal: RenewalKind,
    /** The lock kind that releases and extends it. */
    readonly ops: LockHandleOps,
    /** When the acquiring command was sent: the lease cannot have started earlier. */
    sentAt: number,
    /** The keys a renewal touches, in renew-many-n.lua's order for `renewal`. */
    readonly renewalKeys: readonly string[] = [key],
  ) {
    this.expiresAt = sentAt + leaseMs;
  }

  get controller(): AbortController {
    return (this.abortController ??= new AbortController());
  }

  get id(): string {
    return heldLockId(this.key, this.owner);
  }

  /** Explicit leases only: arm (or re-arm) the timer that reports the lease running out. */
  armExpiry(onExpired: (lock: HeldLock, reason: LockLostReason) => void): void {
    this.disarmExpiry();
    if (this.watched) return;
    // Chunked past setTimeout's limit: a 30-day lease must not be reported lost 1 ms in.
    this.expiryTimer = setLongTimeout(() => onExpired(this, 'lease-expired'), this.expiresAt - Date.now());
  }

  disarmExpiry(): void {
    this.expiryTimer?.clear();
    this.expiryTimer = undefined;
  }
}

export function heldLockId(key: string, owner: string): string {
  return `${key}\u0000${owner}`;
}
