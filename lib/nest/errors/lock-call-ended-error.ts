import { LockCallCancelledError } from './lock-call-cancelled-error';

/**
 * The reason a decorated call's `signal` aborts when its result ended (a Promise settled, an Observable
 * completed or errored: a `timeout()`, a `race()`, a failed `forkJoin` branch) while promises its work
 * started still run. The lock is still held: it is released once they have settled, so work that sees
 * this should stop. A LockCallCancelledError: nobody waits for that work's outcome any more.
 */
export class LockCallEndedError extends LockCallCancelledError {}
