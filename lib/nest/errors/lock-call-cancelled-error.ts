import { LockError } from '../../engine/errors';

/**
 * The reason a decorated call's `signal` aborts when its caller went away before its work ended (an
 * HTTP client or SSE stream that disconnected, an Observable unsubscribed). The lock is still held: it
 * is released once the work has stopped (see `@DistributedLock`), so work that sees this may finish
 * or stop early, as it likes.
 */
export class LockCallCancelledError extends LockError {}
