import { LockError } from './lock-error';

/**
 * Fewer replicas than required acknowledged the acquisition within the timeout (replica sync). The
 * lock was released again, so a failover right now could not hand it to a second owner.
 */
export class ReplicaSyncError extends LockError {
  constructor(
    key: string,
    readonly acknowledged: number,
    readonly required: number,
    readonly timeoutMs: number,
  ) {
    super(
      `Lock "${key}": ${acknowledged} of ${required} required replicas acknowledged within ${timeoutMs} ms; ` +
        'the lock was released. Check replication health or lower replicaSync.replicas.',
      key,
    );
  }
}
