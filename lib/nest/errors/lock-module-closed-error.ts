import { LockError } from '../../engine/errors';

/**
 * The application is shutting down: its RedisLockModule takes no new lock (a wait in progress is
 * cut short with this error). Over HTTP the interceptor answers 503.
 */
export class LockModuleClosedError extends LockError {}
