import { LockError } from './lock-error';

/**
 * Why a hold ended under its holder: `not-owner` (a renewal or release found another owner, or none),
 * `lease-expired` (an explicit lease ran out), `unreachable` (Redis stayed unreachable until the lease
 * must have expired), `refused` (Redis answered every renewal with a refusal, e.g. READONLY from a demoted
 * server, until the lease must have expired), `closed` (its client is closing, or the application shutting down past its
 * `shutdownTimeout`, and releases it while the work may still run).
 */
export type LockLostReason = 'not-owner' | 'lease-expired' | 'unreachable' | 'refused' | 'closed';

/**
 * The holder no longer owns the lock (see LockLostReason). Delivered through the holder's AbortSignal
 * and the client's `lockLost` event (logged as a warning), never as an unhandled rejection.
 */
export class LockLostError extends LockError {
  constructor(
    key: string,
    readonly owner: string,
    readonly reason: LockLostReason,
  ) {
    super(
      reason === 'closed'
        ? `Lock "${key}" held by "${owner}" is released because its client is closing while the work under it may still run; stop that work.`
        : `Lock "${key}" held by "${owner}" was lost (${reason}); stop work that relies on it.`,
      key,
    );
  }
}
