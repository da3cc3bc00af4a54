import { LockError } from './lock-error';

/** The lock was still held by someone else (or a semaphore's permits were) when the wait time ran out. */
export class LockAcquireTimeoutError extends LockError {
  constructor(
    key: string,
    readonly waitTime: number,
    /** How long the current holder's lease still runs, in ms, when known: a hint for a retry. */
    readonly retryAfterMs?: number,
    message = `Could not acquire lock "${key}" within ${waitTime} ms: it is held by another owner.`,
  ) {
    super(message, key);
  }
}
