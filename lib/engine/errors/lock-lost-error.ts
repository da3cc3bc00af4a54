import { LockError } from './lock-error';

export type LockLostReason = 'not-owner' | 'lease-expired' | 'unreachable';

/**
 * The holder no longer owns the lock: a renewal found another owner (or none), the explicit lease ran
 * out, or Redis stayed unreachable until the lease must have expired. Delivered through the holder's
 * AbortSignal and the client's `lockLost` event, never as an unhandled rejection.
 */
export class LockLostError extends LockError {
  constructor(
    key: string,
    readonly owner: string,
    readonly reason: LockLostReason,
  ) {
    super(`Lock "${key}" held by "${owner}" was lost (${reason}); stop work that relies on it.`, key);
  }
}
