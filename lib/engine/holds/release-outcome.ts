/**
 * What a release did, as Redis saw it:
 * - `released`: the last hold is gone and the next waiter was notified;
 * - `decremented`: a reentrant hold was released, outer holds of the same owner remain;
 * - `expired`: the lock had already expired or been lost; there was nothing of ours to release;
 * - `pending`: Redis could not take the release within operationTimeout (a failover, an outage), though
 *   it was sent again meanwhile; it goes on being sent in the background until it lands or the lease has
 *   ended, whichever comes first.
 */
export type ReleaseOutcome = 'released' | 'decremented' | 'expired' | 'pending';
